/**
 * The test vectors published in openapi/agent-wallet.yaml, read from the document itself so the
 * documentation and the implementation cannot drift apart.
 */
import { createHash, createPrivateKey, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { hashTypedData, recoverTypedDataAddress, type Hex } from 'viem';
import { privateKeyToAccount, privateKeyToAddress } from 'viem/accounts';
import { createTestContext, type TestContext } from '../harness/context.js';
import { OPENAPI_DIR } from '../../src/http/spec.js';
import { authorizationBytes, requestPayload } from '../../src/agent-wallet/protocol.js';
import { validateTypedData } from '../../src/agent-wallet/typed-data.js';
import { parseDerSignature } from '../../src/agent-wallet/p256.js';
import { AgentWalletRuntimeService } from '../../src/agent-wallet/runtime.service.js';
import { KnexAgentWalletRepository } from '../../src/agent-wallet/agent-wallet.repository.js';
import { defaultPolicyRules } from '../../src/agent-wallet/default-policy.js';
import { DEFAULT_CHAINS } from '../../src/agent-wallet/chains.js';
import { SecretBox } from '../../src/kernel/secrets.js';

const doc = parse(readFileSync(path.join(OPENAPI_DIR, 'agent-wallet.yaml'), 'utf8'));
const info: string = doc.info.description;
const op = doc.paths['/v1/agent-wallet/sign-typed-data'].post;
const opText: string = op.description;
const requestExample = op.requestBody.content['application/json'].example;
const responseExample = op.responses['200'].content['application/json'].example;

function grab(text: string, pattern: RegExp): string {
  const match = pattern.exec(text);
  if (!match?.[1]) throw new Error(`vector not found: ${pattern}`);
  return match[1];
}

const PKCS8 = grab(info, /PKCS#8 DER, standard base64:\s+`([A-Za-z0-9+/=]+)`/);
const SPKI = grab(info, /the `X-Agent-Pubkey` value\):\s+`([A-Za-z0-9+/=]+)`/);
const PAYLOAD_HEX = grab(info, /the payload is hex\s+`([0-9a-f]+)`/);
const REQUEST_SIGNATURE = grab(info, /and the signature\s+`([A-Za-z0-9+/=]+)` verifies/);
const CANONICAL = grab(opText, /```\n(\{"body".*\})\n```/);
const CANONICAL_LENGTH = Number(grab(opText, /canonical payload is this (\d+)-byte string/));
const CANONICAL_SHA256 = grab(opText, /Its SHA-256 is `([0-9a-f]{64})`/);
const WALLET_KEY = grab(opText, /well-known test key\s+`(0x[0-9a-f]{64})`/) as Hex;
const WALLET_ADDRESS = grab(opText, /\(address\s+`(0x[0-9a-fA-F]{40})`\)/);
const TYPED_DATA_HASH = grab(opText, /hashes the example's typed data to\s+`(0x[0-9a-f]{64})`/);
const APP_ID = grab(opText, /whose `appId` is\s+`([^`]+)`/);
const API_URL = 'http://localhost:3001';
const SIGN_URL = `${API_URL}/v1/agent-wallet/sign-typed-data`;

const privateKey = createPrivateKey({ key: Buffer.from(PKCS8, 'base64'), format: 'der', type: 'pkcs8' });
const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

function highS(signature: Buffer): Buffer {
  const { r, s } = parseDerSignature(signature)!;
  const int = (b: Buffer) => {
    const v = b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b;
    return Buffer.concat([Buffer.from([0x02, v.length]), v]);
  };
  let flipped = (P256_N - BigInt(`0x${s.toString('hex')}`)).toString(16);
  if (flipped.length % 2) flipped = `0${flipped}`;
  const body = Buffer.concat([int(r), int(Buffer.from(flipped, 'hex'))]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
}

describe('request authentication vector', () => {
  it('the published public key is the one of the published private key', () => {
    expect(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }).toString('base64')).toBe(SPKI);
  });

  it('the payload of GET /v1/agent-wallet at 1763800000 is the published bytes', () => {
    expect(requestPayload('GET', '/v1/agent-wallet', '1763800000').toString('hex')).toBe(PAYLOAD_HEX);
    expect(Buffer.from(PAYLOAD_HEX, 'hex').toString('utf8')).toBe('GET\n/v1/agent-wallet\n1763800000');
  });

  it('the published signature verifies, and so does its high-S form', () => {
    const key = createPublicKey({ key: Buffer.from(SPKI, 'base64'), format: 'der', type: 'spki' });
    const sig = Buffer.from(REQUEST_SIGNATURE, 'base64');
    expect(verify('sha256', Buffer.from(PAYLOAD_HEX, 'hex'), key, sig)).toBe(true);
    expect(verify('sha256', Buffer.from(PAYLOAD_HEX, 'hex'), key, highS(sig))).toBe(true);
    expect(verify('sha256', requestPayload('GET', '/v1/agent-wallet', '1763800001'), key, sig)).toBe(false);
  });
});

describe('wallet authorization signature vector', () => {
  const { signature, ...unsigned } = requestExample as { signature: string; typed_data: unknown };

  it('the canonical JSON of the request example is the published string', () => {
    const bytes = authorizationBytes({ url: SIGN_URL, body: unsigned, appId: APP_ID });
    expect(bytes.toString('utf8')).toBe(CANONICAL);
    expect(bytes.length).toBe(CANONICAL_LENGTH);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(CANONICAL_SHA256);
  });

  it("the example's signature verifies over it, and fails for another URL or app id", () => {
    const key = createPublicKey(privateKey);
    const sig = Buffer.from(signature, 'base64');
    expect(verify('sha256', Buffer.from(CANONICAL, 'utf8'), key, sig)).toBe(true);
    expect(verify('sha256', authorizationBytes({ url: 'http://localhost:3000/v1/agent-wallet/sign-typed-data', body: unsigned, appId: APP_ID }), key, sig)).toBe(false);
    expect(verify('sha256', authorizationBytes({ url: SIGN_URL, body: unsigned, appId: 'ORG_x' }), key, sig)).toBe(false);
  });
});

describe('EIP-712 vector', () => {
  it('the example typed data hashes and signs to the published values', async () => {
    expect(privateKeyToAddress(WALLET_KEY)).toBe(WALLET_ADDRESS);
    const typed = validateTypedData(requestExample.typed_data);
    expect(hashTypedData(typed as never)).toBe(TYPED_DATA_HASH);
    const signature = await privateKeyToAccount(WALLET_KEY).signTypedData(typed as never);
    expect(signature).toBe(responseExample.data.signature);
    expect(await recoverTypedDataAddress({ ...typed, signature } as never)).toBe(responseExample.data.walletAddress);
  });
});

describe('the vectors against the server', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext({ env: { PUBLIC_API_URL: API_URL } });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('accepts the published request headers at their timestamp', async () => {
    const res = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/agents`).send({ name: 'Vector', publicKey: SPKI });
    expect(res.status).toBe(201);
    ctx.clock.set(1763800000 * 1000);
    const ok = await ctx.platform
      .get('/v1/agent-wallet')
      .set({ 'X-Agent-Pubkey': SPKI, 'X-Agent-Timestamp': '1763800000', 'X-Agent-Signature': REQUEST_SIGNATURE });
    expect(ok.status).toBe(200);
    expect(ok.body.data.publicKey).toBe(SPKI);
  });

  it('signs the request example with the vector wallet: authorization verified, policy allows, signature as published', async () => {
    const agent = (await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/agents`)).body.data[0];
    // A wallet row holding the published secp256k1 test key, sealed with a box this test owns.
    const box = new SecretBox(Buffer.alloc(32, 9));
    const repo = new KnexAgentWalletRepository(ctx.testDb.database.db);
    const walletId = 'WLT_vectorvectorvectorvect';
    await repo.insertWallet(
      {
        id: walletId,
        orgId: ctx.orgA.orgId,
        name: 'Vector',
        address: WALLET_ADDRESS,
        privateKeySealed: box.seal(Buffer.from(WALLET_KEY.slice(2), 'hex'), walletId),
        providerWalletId: 'vectorvectorvectorvector',
        appId: APP_ID,
        createdAt: ctx.clock.now(),
      },
      { id: 'POL_vectorvectorvectorvect', orgId: ctx.orgA.orgId, walletId, name: 'Default', version: '1.0', chainType: 'ethereum', rules: defaultPolicyRules(DEFAULT_CHAINS), spendLimits: [], createdAt: ctx.clock.now() },
      5,
    );
    const service = new AgentWalletRuntimeService(repo, box, ctx.clock);
    const auth = { agentId: agent.agentId, orgId: ctx.orgA.orgId, name: 'Vector', keyQuorumId: agent.keyQuorumId, publicKey: SPKI, walletId, quorumKeys: [SPKI] };
    const result = await service.signTypedData(auth, requestExample, SIGN_URL);
    expect(result).toEqual(responseExample.data);
    await expect(service.signTypedData(auth, requestExample, `${API_URL}/v1/agent-wallet/sign-typed-data/`)).rejects.toMatchObject({
      code: 'FORBIDDEN',
      message: 'Wallet authorization signature is invalid',
    });
  });
});
