/** Request authentication of the agent wallet runtime: every rejection reason, and what passes. */
import { generateKeyPairSync, sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { requestPayload } from '../../src/agent-wallet/protocol.js';
import { parseDerSignature } from '../../src/agent-wallet/p256.js';
import { unixSeconds } from '../../src/kernel/clock.js';
import { agentHeaders, createAgent, createWallet, type TestAgent } from './helpers.js';

const PATH = '/v1/agent-wallet';
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

let ctx: TestContext;
let agent: TestAgent;

beforeAll(async () => {
  ctx = await createTestContext();
  const wallet = await createWallet(ctx, ctx.orgA);
  agent = await createAgent(ctx, ctx.orgA, wallet.walletId);
});
afterAll(async () => {
  await ctx?.close();
});

const now = () => unixSeconds(ctx.clock.now());

async function expect401(headers: Record<string, string>, message: string, path = PATH) {
  const res = await ctx.platform.get(path).set(headers);
  expect(res.status, JSON.stringify(res.body)).toBe(401);
  expect(res.body).toEqual({ success: false, message, error: { code: 'UNAUTHORIZED', message } });
}

function derInt(value: bigint): Buffer {
  let hex = value.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let bytes = Buffer.from(hex, 'hex');
  if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
}

function derSignature(r: bigint, s: bigint): Buffer {
  const body = Buffer.concat([derInt(r), derInt(s)]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
}

/** The same signature in its low-S and high-S forms (both valid ECDSA signatures). */
function bothForms(signature: Buffer): { low: Buffer; high: Buffer } {
  const { r, s } = parseDerSignature(signature)!;
  const rn = BigInt(`0x${r.toString('hex')}`);
  const sn = BigInt(`0x${s.toString('hex')}`);
  const other = P256_N - sn;
  const [low, high] = sn <= P256_N / 2n ? [sn, other] : [other, sn];
  return { low: derSignature(rn, low), high: derSignature(rn, high) };
}

function signedAt(ts: number, method = 'GET', path = PATH, key = agent.privateKey): Buffer {
  return sign('sha256', requestPayload(method, path, String(ts)), key);
}

describe('accepted requests', () => {
  it('accepts a correctly signed request', async () => {
    const res = await ctx.platform.get(PATH).set(agentHeaders(ctx, agent, 'GET', PATH));
    expect(res.status).toBe(200);
    expect(res.body.data.agentId).toBe(agent.agentId);
  });

  it('accepts both the low-S and the high-S form of a signature (fresh signatures)', async () => {
    for (const form of ['low', 'high'] as const) {
      const ts = now();
      ctx.clock.advance(1000);
      const sig = bothForms(signedAt(ts))[form];
      const res = await ctx.platform
        .get(PATH)
        .set({ 'X-Agent-Pubkey': agent.publicKey, 'X-Agent-Timestamp': String(ts), 'X-Agent-Signature': sig.toString('base64') });
      expect(res.status, form).toBe(200);
    }
  });

  it('accepts timestamps exactly 300 s behind and ahead of the server clock', async () => {
    for (const ts of [now() - 300, now() + 300]) {
      const res = await ctx.platform.get(PATH).set(agentHeaders(ctx, agent, 'GET', PATH, ts));
      expect(res.status, String(ts)).toBe(200);
    }
  });

  it('signs the route path only: a query string is not part of the payload', async () => {
    const path = '/v1/agent-wallet/history';
    const res = await ctx.platform.get(`${path}?limit=5`).set(agentHeaders(ctx, agent, 'GET', path));
    expect(res.status).toBe(200);
  });
});

describe('rejections (401 UNAUTHORIZED, envelope)', () => {
  it.each([
    ['X-Agent-Pubkey', 'Missing X-Agent-Pubkey header'],
    ['X-Agent-Timestamp', 'Missing X-Agent-Timestamp header'],
    ['X-Agent-Signature', 'Missing X-Agent-Signature header'],
  ])('refuses a request without %s', async (header, message) => {
    const headers: Record<string, string> = agentHeaders(ctx, agent, 'GET', PATH);
    delete headers[header];
    await expect401(headers, message);
  });

  const malformedKey = 'Malformed X-Agent-Pubkey header: expected standard base64 of a P-256 SubjectPublicKeyInfo';
  it.each([
    ['not base64', () => 'not base64!'],
    ['base64 of garbage', () => Buffer.alloc(91, 1).toString('base64')],
    ['base64url instead of standard base64', () => {
      for (;;) {
        const spki = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
        if (/[+/]/.test(spki)) return spki.replace(/\+/g, '-').replace(/\//g, '_');
      }
    }],
    ['without padding', () => agent.publicKey.replace(/=+$/, '')],
    ['a P-384 key', () => generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64')],
    ['a compressed-point P-256 key', () => {
      const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      const x = Buffer.from(jwk.x!, 'base64url');
      const y = Buffer.from(jwk.y!, 'base64url');
      const prefix = Buffer.from('3039301306072a8648ce3d020106082a8648ce3d030107032200', 'hex');
      return Buffer.concat([prefix, Buffer.from([0x02 + (y[31]! & 1)]), x]).toString('base64');
    }],
  ])('refuses a malformed public key (%s)', async (_label, key) => {
    await expect401({ ...agentHeaders(ctx, agent, 'GET', PATH), 'X-Agent-Pubkey': key() }, malformedKey);
  });

  it.each([['12.5'], ['-5'], ['0123'], ['now'], ['1e9'], ['+1763800000'], ['0x6921']])('refuses a malformed timestamp %j', async (ts) => {
    await expect401(
      { ...agentHeaders(ctx, agent, 'GET', PATH), 'X-Agent-Timestamp': ts },
      'Malformed X-Agent-Timestamp header: expected Unix time in whole seconds',
    );
  });

  it.each([
    ['not base64', () => '***'],
    ['raw r||s (IEEE P1363, as WebCrypto returns it)', () => {
      const { r, s } = parseDerSignature(signedAt(now()))!;
      return Buffer.concat([Buffer.alloc(32 - r.length), r, Buffer.alloc(32 - s.length), s]).toString('base64');
    }],
    ['DER with trailing bytes', () => Buffer.concat([signedAt(now()), Buffer.from([0])]).toString('base64')],
  ])('refuses a malformed signature (%s)', async (_label, sig) => {
    await expect401(
      { ...agentHeaders(ctx, agent, 'GET', PATH), 'X-Agent-Signature': sig() },
      'Malformed X-Agent-Signature header: expected standard base64 of a DER ECDSA signature',
    );
  });

  it.each([[-301], [301], [-86_400]])('refuses a timestamp %i s away from the server clock', async (offset) => {
    await expect401(
      agentHeaders(ctx, agent, 'GET', PATH, now() + offset),
      'Request timestamp is outside the allowed window of 300 seconds',
    );
  });

  it('refuses a key that is not registered', async () => {
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const stranger = { publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), privateKey };
    await expect401(agentHeaders(ctx, stranger, 'GET', PATH), 'Unknown agent public key');
  });

  it.each([
    ['another method', () => signedAt(now(), 'POST')],
    ['another route', () => signedAt(now(), 'GET', '/v1/agent-wallet/policies')],
    ['the route with a trailing slash', () => signedAt(now(), 'GET', `${PATH}/`)],
    ['another timestamp', () => signedAt(now() - 1)],
    ['another key', () => signedAt(now(), 'GET', PATH, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)],
  ])('refuses a signature over %s', async (_label, sig) => {
    await expect401(
      { 'X-Agent-Pubkey': agent.publicKey, 'X-Agent-Timestamp': String(now()), 'X-Agent-Signature': sig().toString('base64') },
      'Invalid agent request signature',
    );
  });

  it('refuses a replayed signature, and its other-S form, within the window', async () => {
    const headers = agentHeaders(ctx, agent, 'GET', PATH);
    expect((await ctx.platform.get(PATH).set(headers)).status).toBe(200);
    await expect401(headers, 'Replayed agent request signature');
    const { low, high } = bothForms(Buffer.from(headers['X-Agent-Signature'], 'base64'));
    const other = low.toString('base64') === headers['X-Agent-Signature'] ? high : low;
    await expect401({ ...headers, 'X-Agent-Signature': other.toString('base64') }, 'Replayed agent request signature');
    // Once out of the window it is stale; the replay memory is swept lazily.
    ctx.clock.advance(301_000);
    await expect401(headers, 'Request timestamp is outside the allowed window of 300 seconds');
    const db = ctx.testDb.database.db;
    const before = Number((await db('agent_request_signatures').count({ n: '*' }).first())!.n);
    expect((await ctx.platform.get(PATH).set(agentHeaders(ctx, agent, 'GET', PATH))).status).toBe(200);
    const after = Number((await db('agent_request_signatures').count({ n: '*' }).first())!.n);
    expect(after).toBeLessThan(before + 1);
    const expired = await db('agent_request_signatures').where('expires_at', '<=', ctx.clock.now());
    expect(expired).toEqual([]);
  });

  it('refuses a revoked agent at once', async () => {
    const other = await createAgent(ctx, ctx.orgA);
    expect((await ctx.platform.get(PATH).set(agentHeaders(ctx, other, 'GET', PATH))).status).toBe(200);
    await ctx.admin.post(`/v1/agents/${other.agentId}/revoke`).expect(200);
    ctx.clock.advance(1000);
    await expect401(agentHeaders(ctx, other, 'GET', PATH), 'Agent identity is revoked');
  });

  it('remembers nothing for a revoked agent or an unknown key, and checks the signature before the key', async () => {
    const db = ctx.testDb.database.db;
    const count = async () => Number((await db('agent_request_signatures').count({ n: '*' }).first())!.n);
    const revoked = await createAgent(ctx, ctx.orgA);
    await ctx.admin.post(`/v1/agents/${revoked.agentId}/revoke`).expect(200);
    const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const stranger = { publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), privateKey };
    const before = await count();
    await expect401(agentHeaders(ctx, revoked, 'GET', PATH), 'Agent identity is revoked');
    await expect401(agentHeaders(ctx, stranger, 'GET', PATH), 'Unknown agent public key');
    await expect401({ ...agentHeaders(ctx, stranger, 'GET', PATH), 'X-Agent-Timestamp': String(now() - 1) }, 'Invalid agent request signature');
    expect(await count()).toBe(before);
  });

  it('refuses the old key after a rotation and accepts the new one', async () => {
    const other = await createAgent(ctx, ctx.orgA);
    const res = await ctx.admin.post(`/v1/agents/${other.agentId}/rotate-key`).send({});
    expect(res.status).toBe(200);
    const { privateKey } = JSON.parse(Buffer.from(res.body.data.agentWalletKey, 'base64').toString('utf8'));
    const { createPrivateKey } = await import('node:crypto');
    const rotated = { publicKey: res.body.data.publicKey, privateKey: createPrivateKey({ key: Buffer.from(privateKey, 'base64'), format: 'der', type: 'pkcs8' }) };
    expect(res.body.data.keyQuorumId).toBe(other.keyQuorumId);
    ctx.clock.advance(1000);
    await expect401(agentHeaders(ctx, other, 'GET', PATH), 'Unknown agent public key');
    const ok = await ctx.platform.get(PATH).set(agentHeaders(ctx, rotated, 'GET', PATH));
    expect(ok.status).toBe(200);
    expect(ok.body.data.publicKey).toBe(rotated.publicKey);
  });

  it('authenticates before looking at the body: an unauthenticated sign request is 401, not 400', async () => {
    const res = await ctx.platform.post('/v1/agent-wallet/sign-typed-data').send({ nonsense: true });
    expect(res.status).toBe(401);
    expect(res.body.error.message).toBe('Missing X-Agent-Pubkey header');
  });

  it('does not let agent credentials into the merchant API', async () => {
    const res = await ctx.merchant.get('/v1/me').set(agentHeaders(ctx, agent, 'GET', '/v1/me'));
    expect(res.status).toBe(401);
  });
});
