/**
 * hashTypedDataCached is viem's hashTypedData: the same digest for any valid typed data, whether
 * its domain separator was remembered or not, and for declared EIP712Domain lists in any order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashTypedData } from 'viem';
import { hashTypedDataCached } from '../../src/agent-wallet/eip712-hash.js';
import { validateTypedData, type TypedDataInput } from '../../src/agent-wallet/typed-data.js';
import { usdcTransfer } from './typed-data-fixtures.js';

const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => `0x${Buffer.from(b).toString('hex')}`);
const address = hex(20);
const uint = (bits: number) => fc.bigInt({ min: 0n, max: (1n << BigInt(bits)) - 1n }).map(String);

const STANDARD: Record<string, string> = { name: 'string', version: 'string', chainId: 'uint256', verifyingContract: 'address', salt: 'bytes32' };

/** Small domain pools, so that the same domain comes back (cache hits) within a run. */
const domain = fc.record(
  {
    name: fc.constantFrom('USD Coin', 'Permit2', 'Ünïcode ✓', ''),
    version: fc.constantFrom('1', '2'),
    chainId: fc.constantFrom(1, 8453, 84532, '115792089237316195423570985008687907853269984665640564039457584007913129639935'),
    verifyingContract: fc.constantFrom('0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', '0x036cbd53842c5426634e7929541ec2318f3dcf7e'),
    salt: fc.constantFrom(`0x${'00'.repeat(32)}`, `0x${'ab'.repeat(32)}`),
  },
  { requiredKeys: [] },
);

const typedData: fc.Arbitrary<TypedDataInput> = fc
  .tuple(domain, fc.boolean(), fc.boolean(), address, address, uint(256), uint(64), hex(32), fc.string(), fc.array(uint(8), { maxLength: 3 }))
  .chain(([d, declare, shuffle, from, to, value, deadline, nonce, memo, tags]) => {
    const fields = Object.keys(STANDARD).filter((k) => k in d).map((name) => ({ name, type: STANDARD[name]! }));
    return (shuffle ? fc.shuffledSubarray(fields, { minLength: fields.length, maxLength: fields.length }) : fc.constant(fields)).map((order) => ({
      domain: d as TypedDataInput['domain'],
      types: {
        ...(declare ? { EIP712Domain: order } : {}),
        Transfer: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'deadline', type: 'uint64' },
          { name: 'nonce', type: 'bytes32' },
          { name: 'memo', type: 'string' },
          { name: 'tags', type: 'uint8[]' },
          { name: 'note', type: 'Note' },
        ],
        Note: [{ name: 'text', type: 'string' }],
      },
      primary_type: 'Transfer',
      message: { from, to, value, deadline, nonce, memo, tags, note: { text: memo } },
    }));
  });

describe('hashTypedDataCached', () => {
  it('equals viem hashTypedData on random typed data (domains repeat, so cached separators are used too)', () => {
    fc.assert(
      fc.property(typedData, (td) => {
        const validated = validateTypedData(td);
        expect(hashTypedDataCached(validated)).toBe(hashTypedData(validated as never));
      }),
      { numRuns: 400 },
    );
  });

  it('tells apart domains that differ only in the order of their declared EIP712Domain fields', () => {
    const td = usdcTransfer('0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', '10');
    const reordered = { ...td, types: { ...td.types, EIP712Domain: [...td.types.EIP712Domain].reverse() } };
    const [a, b] = [validateTypedData(td), validateTypedData(reordered)];
    expect(hashTypedDataCached(a)).toBe(hashTypedData(a as never));
    expect(hashTypedDataCached(b)).toBe(hashTypedData(b as never));
    expect(hashTypedDataCached(a)).not.toBe(hashTypedDataCached(b));
  });
});
