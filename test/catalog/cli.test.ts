/**
 * The catalog nouns of the admin CLI, run through the CLI's own entry in-process
 * (test/harness/admin-cli.ts) against the admin app on an ephemeral port, once per command; their
 * effects are checked through the merchant API. The child-process contract is test/admin-cli.test.ts's.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { runAdminCli, type AdminCliResult } from '../harness/admin-cli.js';

type RunResult = AdminCliResult;

let ctx: TestContext;
let server: Server;
let adminUrl: string;

const cli = (args: string[]): Promise<RunResult> => runAdminCli(adminUrl, ctx.adminToken, args);

function jsonOut(result: RunResult): any {
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout);
}

const merchantGet = (p: string) => ctx.merchant.get(p).set('X-API-Key', ctx.orgA.apiKey);

beforeAll(async () => {
  ctx = await createTestContext();
  server = await new Promise<Server>((resolve) => {
    const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
  });
  adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await ctx?.close();
});

describe('admin CLI: product, price, paymentlink', () => {
  let productId: string;
  let pricingId: string;
  let paymentLinkId: string;
  let paymentLinkUrl: string;

  it('product create prints the product with its productId', async () => {
    const product = jsonOut(await cli(['product', 'create', '--org', ctx.orgA.orgId, '--name', 'CLI plan', '--description', 'Made on the command line', '--status', 'draft']));
    expect(product).toMatchObject({ orgId: ctx.orgA.orgId, name: 'CLI plan', description: 'Made on the command line', status: 'DRAFT' });
    expect(product.productId).toMatch(/^PRD_[0-9A-Za-z]{24}$/);
    productId = product.productId;
    expect((await merchantGet(`/v1/product/${productId}`)).body.data.status).toBe('DRAFT');
  });

  it('product update changes fields; --no-description removes the description', async () => {
    const product = jsonOut(await cli(['product', 'update', '--product', productId, '--name', 'CLI plan+', '--no-description', '--status', 'PUBLISHED']));
    expect(product).toMatchObject({ productId, name: 'CLI plan+', description: null, status: 'PUBLISHED' });
    const read = (await merchantGet(`/v1/product/${productId}`)).body.data;
    expect(read).toMatchObject({ name: 'CLI plan+', status: 'PUBLISHED' });
    expect(read).not.toHaveProperty('description');
  });

  it('price create prints the price with its pricingId', async () => {
    const price = jsonOut(
      await cli(['price', 'create', '--product', productId, '--amount', '2500', '--currency', 'usd', '--type', 'subscription', '--interval', 'month', '--interval-count', '3', '--name', 'Quarterly']),
    );
    expect(price).toMatchObject({
      productId, amount: 2500, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', billingIntervalCount: 3, pricingName: 'Quarterly', provider: 'STRIPE', active: true,
    });
    expect(price.pricingId).toMatch(/^PRC_[0-9A-Za-z]{24}$/);
    pricingId = price.pricingId;
  });

  it('price create with --flexible and --provider CRYPTO', async () => {
    const price = jsonOut(await cli(['price', 'create', '--product', productId, '--amount', '5000000', '--currency', 'USDC', '--provider', 'crypto', '--flexible', '--min', '1000000', '--max', '9000000']));
    expect(price).toMatchObject({ currency: 'USDC', provider: 'CRYPTO', pricingType: 'ONE_TIME', flexibleAmount: true, minAmount: 1_000_000, maxAmount: 9_000_000 });
  });

  it('price create relays the API rule violation as a JSON error (exit 1)', async () => {
    const result = await cli(['price', 'create', '--product', productId, '--amount', '100', '--currency', 'USD', '--provider', 'CRYPTO']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const { error } = JSON.parse(result.stderr);
    expect(error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
    expect(error.message).toContain('currency');
  });

  it('price create refuses a non-integer amount before sending anything (exit 2)', async () => {
    const result = await cli(['price', 'create', '--product', productId, '--amount', '15.00', '--currency', 'USD']);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr).error).toMatchObject({ code: 'USAGE_ERROR', message: expect.stringContaining('--amount') });
  });

  it('paymentlink create prints paymentLinkId and paymentLinkUrl', async () => {
    const link = jsonOut(await cli(['paymentlink', 'create', '--price', pricingId]));
    expect(link).toMatchObject({ pricingId, productId, name: 'Quarterly', isActive: true });
    expect(link.paymentLinkId).toMatch(/^PLK_[0-9A-Za-z]{24}$/);
    expect(link.paymentLinkUrl).toMatch(/^http:\/\/merchant\.test\/pay\/[0-9A-Za-z]{32}$/);
    paymentLinkId = link.paymentLinkId;
    paymentLinkUrl = link.paymentLinkUrl;
    const read = (await merchantGet(`/v1/product/${productId}`)).body.data;
    expect(read.paymentLinks).toEqual([expect.objectContaining({ paymentLinkId, paymentLinkUrl, isActive: true, pricingId })]);
  });

  it('paymentlink deactivate makes the link inactive', async () => {
    const link = jsonOut(await cli(['paymentlink', 'deactivate', '--id', paymentLinkId]));
    expect(link).toMatchObject({ paymentLinkId, isActive: false, paymentLinkUrl });
    const read = (await merchantGet(`/v1/product/${productId}`)).body.data;
    expect(read.paymentLinks[0]).toMatchObject({ paymentLinkId, isActive: false });
  });

  it('price list shows the product prices; price deactivate stops one', async () => {
    const prices = jsonOut(await cli(['price', 'list', '--product', productId]));
    expect(prices.map((p: any) => p.pricingId)).toContain(pricingId);
    const deactivated = jsonOut(await cli(['price', 'deactivate', '--id', pricingId]));
    expect(deactivated).toMatchObject({ pricingId, active: false });
  });

  it('product list shows the organization products; product archive archives', async () => {
    const page = jsonOut(await cli(['product', 'list', '--org', ctx.orgA.orgId, '--search', 'cli']));
    expect(page).toMatchObject({ total: 1, records: [expect.objectContaining({ productId })] });
    const archived = jsonOut(await cli(['product', 'archive', '--product', productId]));
    expect(archived).toMatchObject({ productId, status: 'ARCHIVED' });
    expect((await merchantGet('/v1/product?status=ARCHIVED')).body.data.records.map((p: any) => p.productId)).toEqual([productId]);
  });
});
