/**
 * Issue 37 §15 and §27: a display name or product name is one line of text. A control character
 * (CR/LF, tab, NUL) is refused with a clear 400 wherever the name is set; a name stored before
 * that rule is shown on one line (hosted pages, the e-mails' sender and subjects).
 */
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

const EVIL = 'Acme\r\nBcc: victim@example.com <b>x</b>';

describe('names with control characters', () => {
  it('a display name with CR/LF is refused by the operator API, with a 400 naming the field', async () => {
    const patched = await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ displayName: EVIL });
    expect(patched.status).toBe(400);
    expect(patched.body.error.code).toBe('VALIDATION_ERROR');
    expect(patched.body.error.message).toContain('displayName must be one line of text');
    const created = await ctx.admin.post('/v1/orgs').send({ name: 'Tab\there' });
    expect(created.status).toBe(400);
    expect((await ctx.admin.patch(`/v1/orgs/${ctx.orgA.orgId}`).send({ displayName: 'Acme <b>Coffee</b> & Co' })).status).toBe(200);
  });

  it('a product name with a line break or NUL is refused by the operator API (create and rename)', async () => {
    for (const name of ['Pro\nplan', 'Pro\u0000plan', 'Pro\u0085plan']) {
      const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/products`).send({ name });
      expect(res.status, JSON.stringify(name)).toBe(400);
      expect(res.body.error.message).toContain('name must be one line of text');
    }
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Fine' });
    expect((await ctx.admin.patch(`/v1/products/${product.id}`).send({ name: 'Still\r\nfine?' })).status).toBe(400);
  });

  it('a name stored before the rule is shown on one line, HTML-escaped', async () => {
    await ctx.testDb.database.db('organizations').where({ id: ctx.orgB.orgId }).update({ display_name: EVIL });
    expect(await ctx.services.orgs.displayNameOf(ctx.orgB.orgId)).toBe('Acme Bcc: victim@example.com <b>x</b>');
    const page = await supertest(ctx.apps.merchant).get(`/portal/o/${ctx.orgB.orgId}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Acme Bcc: victim@example.com &lt;b&gt;x&lt;/b&gt;');
    expect(page.text).not.toContain('Acme\r\n');
  });
});
