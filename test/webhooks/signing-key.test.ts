import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

describe('GET {api_url}/v1/webhooks/signing-key', () => {
  it('is public, cacheable and has the documented shape', async () => {
    const res = await ctx.platform.get('/v1/webhooks/signing-key');
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    const data = res.body.data;
    expect(data.algorithm).toBe('ed25519');
    expect(data.keyId).toMatch(/^WSK_/);
    expect(data.publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(data.keys).toEqual([{ kty: 'OKP', use: 'sig', crv: 'Ed25519', kid: data.keyId, x: expect.any(String), alg: 'EdDSA' }]);
  });

  it('publishes one key two ways (whpk_ base64 raw and JWKS x) that node:crypto imports', async () => {
    const { data } = (await ctx.platform.get('/v1/webhooks/signing-key')).body;
    const raw = Buffer.from(data.publicKey.slice('whpk_'.length), 'base64');
    expect(raw).toHaveLength(32);
    const jwk = createPublicKey({ key: data.keys[0], format: 'jwk' });
    expect(jwk.asymmetricKeyType).toBe('ed25519');
    expect(Buffer.from(jwk.export({ format: 'jwk' }).x!, 'base64url').equals(raw)).toBe(true);
  });

  it('matches the stored private key, which is sealed (not stored in the clear)', async () => {
    const { data } = (await ctx.platform.get('/v1/webhooks/signing-key')).body;
    const row = await ctx.testDb.database.db('webhook_signing_keys').where({ id: data.keyId }).first();
    expect(row.private_key_sealed).toMatch(/^v1\./);
    expect(row.private_key_sealed).not.toContain('MC4CAQAwBQYDK2Vw'); // PKCS#8 Ed25519 DER prefix in base64
    // Open it the way the delivery worker will, sign, and verify with the published JWK.
    const privateKey = createPrivateKey({ key: ctx.deps.services.signingKeys['box'].open(row.private_key_sealed, row.id), format: 'der', type: 'pkcs8' });
    const message = Buffer.from('EVT_1.1795300000.{"type":"order.paid"}');
    const signature = sign(null, message, privateKey);
    expect(verify(null, message, createPublicKey({ key: data.keys[0], format: 'jwk' }), signature)).toBe(true);
  });

  it('creates the key once even when two processes race at start', async () => {
    await Promise.all([ctx.services.signingKeys.ensureKey(), ctx.services.signingKeys.ensureKey()]);
    const rows = await ctx.testDb.database.db('webhook_signing_keys').whereNull('retired_at');
    expect(rows).toHaveLength(1);
  });
});
