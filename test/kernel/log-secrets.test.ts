/**
 * Secrets that reach a log inside text rather than under a named field: the bearer tokens of the
 * hosted pages' paths (the access log names the route pattern instead), a chain RPC provider's key
 * in the node URL's path or query (a failed call is logged with the chain id and host only, even
 * when the provider echoes the key), any value registered with the logger as secret, and the
 * console's secrets: passwords, session and CSRF tokens, invite tokens, and passkey material
 * (ceremony challenges and their ids, clientDataJSON, attestation objects, signatures).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretValues, urlSecretParts } from '../../src/kernel/redaction.js';
import { ViemChainClient } from '../../src/crypto-payments/chain-client.js';
import { createLink, createPrice, createProduct } from '../catalog/fixtures.js';
import { ORIGIN, PASSWORD, linkToken, sessionCookieOf } from '../accounts/helpers.js';
import { SoftAuthenticator } from '../accounts/soft-authenticator.js';

const CHAIN = 31337;
const PATH_KEY = 'alchemyKey0123456789abcdefXYZ';
const QUERY_KEY = 'etherscanKey9876543210QWERTY';
const lines: string[] = [];
let ctx: TestContext;
let rpc: http.Server;
let rpcUrl: string;
let rpcHost: string;

/** A provider that refuses the key and, as some do, repeats it in its error. */
async function startRefusingNode(): Promise<void> {
  rpc = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32001, message: `Unauthorized: invalid API key ${PATH_KEY} (apikey=${QUERY_KEY})` } }));
    });
  });
  await new Promise<void>((resolve) => rpc.listen(0, '127.0.0.1', resolve));
  rpcHost = `127.0.0.1:${(rpc.address() as AddressInfo).port}`;
  rpcUrl = `http://${rpcHost}/v2/${PATH_KEY}?apikey=${QUERY_KEY}`;
}

beforeAll(async () => {
  await startRefusingNode();
  ctx = await createTestContext({
    env: {
      LOG_LEVEL: 'debug',
      CRYPTO_CHAINS: JSON.stringify([
        { chainId: CHAIN, name: 'Local', rpcUrl, confirmations: 2, explorerUrl: 'https://local.test', blockRange: 10, initialLookback: 0, tokens: { USDC: '0x5FbDB2315678afecb367f032d93F642f64180aa3' } },
      ]),
    },
    logDestination: { write: (line) => void lines.push(line) },
  });
});
afterAll(async () => {
  await ctx?.close();
  await new Promise((resolve) => rpc?.close(resolve));
});

describe('the access log', () => {
  it('names hosted pages and API operations by their route pattern, never by a path with its token', async () => {
    const secrets: string[] = [];
    const create = async (body: object, key: string) => {
      const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', key).send(body);
      expect(res.status).toBe(201);
      return { id: res.body.data.id as string, path: new URL(res.body.data.url).pathname };
    };
    const monthly = { pricingData: { amount: 900, currency: 'USD', pricingType: 'SUBSCRIPTION', billingInterval: 'MONTH', productData: { name: 'Plan' } }, customerEmail: 'buyer@example.com' };
    const session = await create(monthly, 'log-1');
    secrets.push(session.path.split('/').pop()!);
    expect((await ctx.merchant.get(session.path)).status).toBe(200);
    expect((await ctx.merchant.post(`${session.path}/pay`).type('form').send({ cardNumber: '4242424242424242', expiry: '12/30', cvc: '123' })).status).toBe(303);
    const complete = await ctx.merchant.get(`${session.path}/complete`);
    const manage = /href="(\/subscriptions\/manage\/[0-9A-Za-z]+)"/.exec(complete.text)![1]!;
    secrets.push(manage.split('/').pop()!);
    expect((await ctx.merchant.get(manage)).status).toBe(200);
    // The confirmation page (GET), then the confirmed cancellation (POST with confirm=yes).
    expect((await ctx.merchant.get(`${manage}/cancel`)).status).toBe(200);
    expect((await ctx.merchant.post(`${manage}/cancel`).type('form').send({ confirm: 'yes' })).status).toBe(200);
    const product = await createProduct(ctx, ctx.orgA.orgId, { name: 'Linked' });
    const price = await createPrice(ctx, product.productId, { amount: 500, currency: 'USD' });
    const link = new URL((await createLink(ctx, price.pricingId)).paymentLinkUrl).pathname;
    secrets.push(link.split('/').pop()!);
    expect((await ctx.merchant.get(link)).status).toBe(303);
    expect((await ctx.merchant.get(`/v1/checkout-sessions/${session.id}`).set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);

    const all = lines.join('');
    for (const route of ['/checkout/{token}', '/checkout/{token}/pay', '/checkout/{token}/complete', '/subscriptions/manage/{token}', '/subscriptions/manage/{token}/cancel', '/pay/{linkToken}', '/v1/checkout-sessions/{id}']) {
      expect(all, route).toContain(`"route":"${route}"`);
    }
    for (const secret of secrets) expect(all.includes(secret), `${secret} is in the log`).toBe(false);
    expect(all).not.toContain(session.id);
  });
});

describe('console sign-in and passkeys', () => {
  it('no password, session or CSRF token, invite token, nor passkey challenge or credential material in any line', async () => {
    const before = lines.length;
    const secrets: string[] = [PASSWORD];
    const email = 'log-secrets-member@example.com';
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email, role: 'owner' });
    const inviteToken = linkToken(invite.body.data.url);
    secrets.push(inviteToken);
    const accepted = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: inviteToken, password: PASSWORD });
    expect(accepted.status).toBe(200);
    const cookie = sessionCookieOf(accepted)!;
    const csrf = accepted.body.data.csrfToken as string;
    secrets.push(cookie.split('=')[1]!, csrf);
    const write = (req: import('supertest').Test) => req.set('Cookie', cookie).set('Origin', ORIGIN).set('X-CSRF-Token', csrf);

    const authenticator = new SoftAuthenticator();
    const options = await write(ctx.merchant.post('/v1/console/passkeys/registration-options'));
    expect(options.status).toBe(200);
    secrets.push(options.body.data.challengeId, options.body.data.publicKey.challenge);
    const { credential, json } = authenticator.create(options.body.data.publicKey, ORIGIN);
    secrets.push(json.response.clientDataJSON, json.response.attestationObject);
    expect((await write(ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.body.data.challengeId, credential: json })).status).toBe(201);

    // A failed registration (an answer to another challenge): the library's message names both challenges.
    const other = await write(ctx.merchant.post('/v1/console/passkeys/registration-options'));
    secrets.push(other.body.data.challengeId, other.body.data.publicKey.challenge);
    const wrong = authenticator.create({ ...other.body.data.publicKey, challenge: 'c29tZS1vdGhlci1jaGFsbGVuZ2UtdmFsdWU' }, ORIGIN);
    secrets.push(wrong.json.response.clientDataJSON, wrong.json.response.attestationObject);
    expect((await write(ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: other.body.data.challengeId, credential: wrong.json })).status).toBe(400);

    // Password, then the passkey.
    const first = await ctx.merchant.post('/v1/console/sign-in').set('Origin', ORIGIN).send({ email, password: PASSWORD });
    expect(first.status).toBe(202);
    secrets.push(first.body.data.challengeId, first.body.data.publicKey.challenge);
    const assertion = authenticator.get(first.body.data.publicKey, ORIGIN, credential);
    secrets.push(assertion.response.clientDataJSON, assertion.response.signature);
    const second = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).send({ challengeId: first.body.data.challengeId, credential: assertion });
    expect(second.status).toBe(200);
    secrets.push(sessionCookieOf(second)!.split('=')[1]!);
    // Replayed: refused.
    expect((await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).send({ challengeId: first.body.data.challengeId, credential: assertion })).status).toBe(401);

    // Passwordless, then a malformed answer (the validator's message must not echo it).
    const pw = await ctx.merchant.post('/v1/console/passkeys/sign-in-options').set('Origin', ORIGIN);
    secrets.push(pw.body.data.challengeId, pw.body.data.publicKey.challenge);
    const passwordless = authenticator.get(pw.body.data.publicKey, ORIGIN, credential);
    secrets.push(passwordless.response.clientDataJSON, passwordless.response.signature);
    const signedIn = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).send({ challengeId: pw.body.data.challengeId, credential: passwordless });
    expect(signedIn.status).toBe(200);
    secrets.push(sessionCookieOf(signedIn)!.split('=')[1]!);
    const malformedSignature = 'bm90LWEtc2lnbmF0dXJlLWJ1dC1zZWNyZXQtbG9va2luZw';
    secrets.push(malformedSignature);
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).send({ challengeId: pw.body.data.challengeId, credential: { ...passwordless, response: { ...passwordless.response, signature: `${malformedSignature}!!` } } })).status).toBe(400);

    const logged = lines.slice(before).join('');
    expect(logged).toContain('"route":"/v1/console/passkeys"');
    for (const secret of secrets) expect(logged.includes(secret), `${secret.slice(0, 12)}… is in the log`).toBe(false);
  });
});

describe('chain RPC failures', () => {
  it('are logged with the chain id and host, never the key in the URL path or query, even when the node echoes it', async () => {
    expect((await ctx.admin.put(`/v1/orgs/${ctx.orgA.orgId}/receiving-wallets/${CHAIN}`).send({ address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' })).status).toBe(200);
    const res = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'log-crypto').send({
      provider: 'CRYPTO', customerEmail: 'buyer@example.com', pricingData: { amount: 2_000_000, currency: 'USDC', productData: { name: 'Ticket' } },
    });
    expect(res.status).toBe(201);
    const before = lines.length;
    await ctx.services.chainWatcher.runOnce();
    const failed = lines.slice(before).map((l) => JSON.parse(l)).find((l) => l.msg === 'crypto chain watcher pass failed');
    expect(failed).toMatchObject({ chainId: CHAIN, rpcHost });
    expect(JSON.stringify(failed.err)).toContain('401');
    const all = lines.join('');
    expect(all).not.toContain(PATH_KEY);
    expect(all).not.toContain(QUERY_KEY);
  });

  it('throw an error whose every field (message, stack, properties) is free of the URL path and query', async () => {
    const error = await new ViemChainClient(rpcUrl).blockNumber().then(() => undefined, (err: unknown) => err as Error & Record<string, unknown>);
    expect(error).toBeDefined();
    const told = JSON.stringify({ ...error, message: error!.message, stack: error!.stack, cause: String(error!.cause) });
    expect(told).toContain(rpcHost);
    expect(told).not.toContain(PATH_KEY);
    expect(told).not.toContain(QUERY_KEY);
    expect(told).not.toContain('/v2/');

    // A node that cannot be reached (connection refused) is told the same way.
    const unreachable = await new ViemChainClient(`http://user:${QUERY_KEY}@127.0.0.1:9/v2/${PATH_KEY}`).block(1n).then(() => undefined, (err: unknown) => err as Error);
    expect(unreachable?.message).toContain('127.0.0.1:9');
    expect(JSON.stringify({ ...unreachable, message: unreachable!.message, stack: unreachable!.stack })).not.toMatch(new RegExp(`${PATH_KEY}|${QUERY_KEY}|/v2/`));
  });
});

describe('value-based redaction', () => {
  it('blanks registered secret values wherever they appear in a line, whatever the field', () => {
    const captured: string[] = [];
    const secrets = new SecretValues();
    for (const part of urlSecretParts(`https://eth.example/v3/${PATH_KEY}?apikey=${QUERY_KEY}&chain=1`)) secrets.add(part);
    secrets.add('quote"and\\backslash-secret');
    const logger = createLogger({ level: 'info', destination: { write: (l) => void captured.push(l) }, secretValues: secrets });
    logger.error({ err: new Error(`GET https://eth.example/v3/${PATH_KEY} failed`), detail: { note: `key=${QUERY_KEY}` }, odd: 'quote"and\\backslash-secret' }, `node said ${PATH_KEY}`);
    const line = captured.join('');
    expect(line).not.toContain(PATH_KEY);
    expect(line).not.toContain(QUERY_KEY);
    expect(line).not.toContain('backslash-secret');
    expect(line).toContain('[redacted]');
    // Short or structural parts of the URL are not secrets: they stay readable.
    expect(urlSecretParts(`https://eth.example/v3/${PATH_KEY}?chain=1`)).not.toContain('v3');
    expect(JSON.parse(line).msg).toBe('node said [redacted]');

    // A value registered after creation (the admin token read from DATA_DIR) counts in child loggers too.
    captured.length = 0;
    secrets.add('kadm_generated_later_0123456789');
    logger.child({ app: 'merchant' }).warn({ header: 'Bearer kadm_generated_later_0123456789' }, 'late');
    expect(captured.join('')).not.toContain('kadm_generated_later_0123456789');
    expect(JSON.parse(captured.join('')).header).toBe('Bearer [redacted]');
  });
});
