/** The wallet signer is viem's `sign` byte for byte: deterministic, low-S, r || s || v. */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { recoverAddress, type Hex } from 'viem';
import { privateKeyToAddress, sign } from 'viem/accounts';
import { signDigest } from '../../src/agent-wallet/wallet-signer.js';

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const hex = (bytes: Uint8Array): Hex => `0x${Buffer.from(bytes).toString('hex')}`;
const privateKey = fc.uint8Array({ minLength: 32, maxLength: 32 }).filter((k) => {
  const n = BigInt(hex(k));
  return n > 0n && n < SECP256K1_N;
});
const digest = fc.uint8Array({ minLength: 32, maxLength: 32 });

describe('signDigest', () => {
  it('equals viem sign({ hash, privateKey, to: "hex" })', async () => {
    await fc.assert(
      fc.asyncProperty(privateKey, digest, async (key, hash) => {
        expect(signDigest(hash, key)).toBe(await sign({ hash: hex(hash), privateKey: hex(key), to: 'hex' }));
      }),
      { numRuns: 300 },
    );
  });

  it('is 65 bytes, low-S, v of 27 or 28, and recovers the wallet address', async () => {
    const key = randomBytes(32);
    const hash = randomBytes(32);
    const signature = signDigest(hash, key);
    expect(signature).toMatch(/^0x[0-9a-f]{128}(1b|1c)$/);
    expect(BigInt(`0x${signature.slice(66, 130)}`) <= SECP256K1_N / 2n).toBe(true);
    expect(await recoverAddress({ hash: hex(hash), signature })).toBe(privateKeyToAddress(hex(key)));
  });

  it('refuses a digest that is not 32 bytes', () => {
    expect(() => signDigest(randomBytes(31), randomBytes(32))).toThrow('digest must be 32 bytes');
  });
});
