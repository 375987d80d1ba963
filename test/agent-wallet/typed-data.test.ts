/** Typed-data validation: types define primary_type, values match their Solidity types. */
import { describe, expect, it } from 'vitest';
import { hashTypedData } from 'viem';
import { validateTypedData, type TypedDataInput } from '../../src/agent-wallet/typed-data.js';
import { usdcTransfer } from './typed-data-fixtures.js';

const FROM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

function withField(type: string, value: unknown): TypedDataInput {
  return { domain: { name: 'T', chainId: 1 }, types: { M: [{ name: 'v', type }], S: [{ name: 'x', type: 'uint8' }] }, primary_type: 'M', message: { v: value } };
}

describe('validateTypedData', () => {
  it.each([
    ['uint256', '115792089237316195423570985008687907853269984665640564039457584007913129639935'],
    ['uint256', 42],
    ['uint8', '255'],
    ['int8', '-128'],
    ['int256', -5],
    ['address', '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'],
    ['address', '0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed'],
    ['bool', false],
    ['string', ''],
    ['bytes', '0x'],
    ['bytes', '0xdeadBEEF'],
    ['bytes1', '0x00'],
    ['bytes32', `0x${'ab'.repeat(32)}`],
    ['uint8[]', [1, '2']],
    ['uint8[2]', [1, 2]],
    ['S', { x: 1 }],
    ['S[]', [{ x: 1 }, { x: '2' }]],
  ])('accepts %s %j', (type, value) => {
    expect(() => validateTypedData(withField(type, value))).not.toThrow();
  });

  it.each([
    ['uint256', '2.5', 'typed_data.message.v: expected uint256 (JSON integer or decimal string)'],
    ['uint256', '0x10', 'typed_data.message.v: expected uint256 (JSON integer or decimal string)'],
    ['uint256', '007', 'typed_data.message.v: expected uint256 (JSON integer or decimal string)'],
    ['uint256', 2 ** 53, 'typed_data.message.v: expected uint256 (JSON integer or decimal string)'],
    ['uint256', '115792089237316195423570985008687907853269984665640564039457584007913129639936', 'typed_data.message.v: 115792089237316195423570985008687907853269984665640564039457584007913129639936 is out of range for uint256'],
    ['uint8', 256, 'typed_data.message.v: 256 is out of range for uint8'],
    ['uint8', -1, 'typed_data.message.v: -1 is out of range for uint8'],
    ['int8', '128', 'typed_data.message.v: 128 is out of range for int8'],
    ['address', '0x123', 'typed_data.message.v: expected address (0x + 40 hex characters)'],
    ['address', '0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed', 'typed_data.message.v: mixed-case address fails its EIP-55 checksum'],
    ['bool', 'true', 'typed_data.message.v: expected bool (true or false)'],
    ['string', 5, 'typed_data.message.v: expected string'],
    ['bytes', '0xabc', 'typed_data.message.v: expected bytes as 0x-prefixed hex'],
    ['bytes32', '0xab', 'typed_data.message.v: expected bytes32 (exactly 32 bytes)'],
    ['uint8[]', '1,2', 'typed_data.message.v: expected uint8[] (JSON array)'],
    ['uint8[2]', [1], 'typed_data.message.v: expected 2 elements for uint8[2], got 1'],
    ['uint8[]', [1, 'x'], 'typed_data.message.v[1]: expected uint8 (JSON integer or decimal string)'],
    ['S', [1], 'typed_data.message.v: expected S (JSON object)'],
    ['S', { x: 1, y: 2 }, 'typed_data.message.v.y: not a field of S'],
    ['S', {}, "typed_data.message.v: missing field 'x' of S"],
  ])('refuses %s %j', (type, value, message) => {
    expect(() => validateTypedData(withField(type, value))).toThrow(message);
  });

  it.each([
    ['undefined primary type', { ...usdcTransfer(FROM, '1'), primary_type: 'Permit' }, "typed_data.types must define the primary type 'Permit'"],
    ['EIP712Domain as primary type', { ...usdcTransfer(FROM, '1'), primary_type: 'EIP712Domain' }, 'typed_data.primary_type must not be EIP712Domain'],
    ['unknown field type', withField('Unknown', 1), "typed_data.types.M[0]: unknown type 'Unknown' (not a Solidity type and not defined in types)"],
    ['uint with a bad width', withField('uint257', 1), "typed_data.types.M[0]: unknown type 'uint257'"],
    ['duplicate field', { domain: {}, types: { M: [{ name: 'a', type: 'bool' }, { name: 'a', type: 'bool' }] }, primary_type: 'M', message: { a: true } }, "typed_data.types.M[1]: duplicate field name 'a'"],
    [
      'EIP712Domain not matching the domain',
      { ...usdcTransfer(FROM, '1'), domain: { name: 'USD Coin', chainId: 8453 } },
      'typed_data.types.EIP712Domain must declare exactly the fields present in domain (name, chainId)',
    ],
    [
      'EIP712Domain with a wrong type',
      {
        ...usdcTransfer(FROM, '1'),
        domain: { chainId: 8453 },
        types: { ...usdcTransfer(FROM, '1').types, EIP712Domain: [{ name: 'chainId', type: 'uint64' }] },
      },
      'typed_data.types.EIP712Domain[0]: chainId must have type uint256, not uint64',
    ],
    ['chainId 0', { ...withField('bool', true), domain: { chainId: 0 } }, 'typed_data.domain.chainId: expected a positive integer'],
    ['a recursive struct nested too deep', (() => {
      let node: Record<string, unknown> = { children: [] };
      for (let i = 0; i < 40; i++) node = { children: [node] };
      return { domain: {}, types: { Node: [{ name: 'children', type: 'Node[]' }] }, primary_type: 'Node', message: node };
    })(), 'nested deeper than 32 levels'],
  ])('refuses %s', (_label, td, message) => {
    expect(() => validateTypedData(td as TypedDataInput)).toThrow(message);
  });

  it('derives the EIP712Domain when it is not given, so the hash equals the one with it given', () => {
    const withDomainType = usdcTransfer(FROM, '2500000');
    const { EIP712Domain: _omitted, ...types } = withDomainType.types;
    const a = validateTypedData(withDomainType);
    const b = validateTypedData({ ...withDomainType, types });
    expect(hashTypedData(a as never)).toBe(hashTypedData(b as never));
  });

  it('hashes decimal-string and JSON-integer values alike, and checksum case does not matter', () => {
    const base = usdcTransfer(FROM, '2500000');
    const variant = { ...base, domain: { ...base.domain, chainId: '8453' }, message: { ...base.message, value: 2500000, from: FROM.toLowerCase() } };
    expect(hashTypedData(validateTypedData(base) as never)).toBe(hashTypedData(validateTypedData(variant as never) as never));
  });
});
