/** The policy engine as pure functions: evaluation tables and validation messages. */
import { describe, expect, it } from 'vitest';
import {
  applicableSpendLimits,
  conditionHolds,
  spendLimitExceeded,
  transferFacts,
  validateSpendLimits,
  evaluatePolicies,
  NO_ALLOWING_RULE,
  validatePolicyRules,
  type PolicyCondition,
  type PolicyRule,
  type SigningRequest,
} from '../../src/agent-wallet/policy-engine.js';
import { defaultPolicyRules, TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/agent-wallet/default-policy.js';
import { DEFAULT_CHAINS } from '../../src/agent-wallet/chains.js';
import { usdcTransfer, BASE_USDC } from './typed-data-fixtures.js';

const NOW = 1_795_000_000;
const ctx = { nowUnix: NOW };
const FROM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

const request = (value: string, overrides: Parameters<typeof usdcTransfer>[2] = {}): SigningRequest => ({
  method: 'eth_signTypedData_v4',
  typedData: usdcTransfer(FROM, value, overrides),
});

/** A nested message: an order with a payee struct and an array of items. */
const nestedRequest: SigningRequest = {
  method: 'eth_signTypedData_v4',
  typedData: {
    domain: { name: 'Shop', chainId: '8453' },
    types: {
      Order: [
        { name: 'payee', type: 'Party' },
        { name: 'items', type: 'Item[]' },
        { name: 'express', type: 'bool' },
      ],
      Party: [
        { name: 'wallet', type: 'address' },
        { name: 'name', type: 'string' },
      ],
      Item: [{ name: 'amount', type: 'uint256' }],
    },
    primary_type: 'Order',
    message: {
      payee: { wallet: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359', name: 'Ada' },
      items: [{ amount: '115792089237316195423570985008687907853269984665640564039457584007913129639935' }, { amount: 7 }],
      express: true,
    },
  },
};

const cond = (field_source: PolicyCondition['field_source'], field: string, operator: PolicyCondition['operator'], value: PolicyCondition['value']): PolicyCondition => ({
  field_source,
  field,
  operator,
  value,
});
const msg = (field: string, operator: PolicyCondition['operator'], value: PolicyCondition['value']) =>
  cond('ethereum_typed_data_message', field, operator, value);

describe('conditionHolds', () => {
  it.each([
    // operator, field value 2500000
    ['eq equal', msg('value', 'eq', '2500000'), true],
    ['eq number vs decimal string', msg('value', 'eq', 2500000), true],
    ['eq different', msg('value', 'eq', '2500001'), false],
    ['gt below', msg('value', 'gt', '2499999'), true],
    ['gt equal', msg('value', 'gt', '2500000'), false],
    ['gte equal', msg('value', 'gte', '2500000'), true],
    ['gte above', msg('value', 'gte', '2500001'), false],
    ['lt above', msg('value', 'lt', '2500001'), true],
    ['lt equal', msg('value', 'lt', 2500000), false],
    ['lte equal', msg('value', 'lte', '2500000'), true],
    ['lte below', msg('value', 'lte', '2499999'), false],
    ['in listed', msg('value', 'in', ['1', 2500000, '3']), true],
    ['in not listed', msg('value', 'in', ['1', '3']), false],
    ['in with a scalar value never holds', msg('value', 'in', '2500000'), false],
    ['eq with an array value never holds', msg('value', 'eq', ['2500000']), false],
    ['gt on a non-numeric value never holds', msg('value', 'gt', 'abc'), false],
    ['absent field never holds', msg('amount', 'eq', '2500000'), false],
    ['absent field never holds, even for lt', msg('amount', 'lt', '99999999999'), false],
  ])('%s', (_label, condition, expected) => {
    expect(conditionHolds(condition, request('2500000'), ctx)).toBe(expected);
  });

  it.each([
    ['lower-case value vs checksummed field', msg('to', 'eq', '0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359'), true],
    ['upper-case value', msg('to', 'eq', '0xFB6916095CA1DF60BB79CE92CE3EA74C37C5D359'), true],
    ['in with mixed case', msg('to', 'in', ['0x0000000000000000000000000000000000000001', '0xFB6916095ca1df60bb79ce92ce3ea74c37c5d359']), true],
    ['domain verifyingContract lower case', cond('ethereum_typed_data_domain', 'verifyingContract', 'eq', BASE_USDC.toLowerCase()), true],
    ['different address', msg('to', 'eq', '0xfb6916095ca1df60bb79ce92ce3ea74c37c5d358'), false],
  ])('addresses compare case-insensitively: %s', (_label, condition, expected) => {
    expect(conditionHolds(condition, request('1'), ctx)).toBe(expected);
  });

  it.each([
    ['uint256 max equals itself', msg('items.0.amount', 'eq', '115792089237316195423570985008687907853269984665640564039457584007913129639935'), true],
    ['uint256 max > 2^256 - 2 (a double cannot tell them apart)', msg('items.0.amount', 'gt', '115792089237316195423570985008687907853269984665640564039457584007913129639934'), true],
    ['2^53 + 1 differs from 2^53', msg('items.0.amount', 'eq', '9007199254740992'), false],
    ['second array element', msg('items.1.amount', 'eq', '7'), true],
    ['index beyond the array', msg('items.2.amount', 'eq', '7'), false],
    ['nested struct address', msg('payee.wallet', 'eq', '0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359'), true],
    ['nested struct string', msg('payee.name', 'in', ['Ada', 'Grace']), true],
    ['bool as "true"', msg('express', 'eq', 'true'), true],
    ['path through a scalar', msg('payee.name.first', 'eq', 'Ada'), false],
    ['path to a struct (not a single value)', msg('payee', 'eq', 'Ada'), false],
    ['domain chainId given as a string', cond('ethereum_typed_data_domain', 'chainId', 'eq', 8453), true],
    ['domain field absent', cond('ethereum_typed_data_domain', 'verifyingContract', 'eq', BASE_USDC), false],
  ])('paths into nested messages and big integers: %s', (_label, condition, expected) => {
    expect(conditionHolds(condition, nestedRequest, ctx)).toBe(expected);
  });

  it.each([
    ['before a deadline', cond('system', 'current_unix_timestamp', 'lt', NOW + 1), true],
    ['at the deadline', cond('system', 'current_unix_timestamp', 'lt', NOW), false],
    ['after a start time', cond('system', 'current_unix_timestamp', 'gte', String(NOW)), true],
    ['unknown system field', cond('system', 'block_number', 'gt', 0), false],
  ])('system current_unix_timestamp comes from the context: %s', (_label, condition, expected) => {
    expect(conditionHolds(condition, request('1'), ctx)).toBe(expected);
  });
});

describe('evaluatePolicies', () => {
  const allowSmall: PolicyRule = { name: 'allow small', method: 'eth_signTypedData_v4', action: 'ALLOW', conditions: [msg('value', 'lte', '1000')] };
  const allowAll: PolicyRule = { name: 'allow all', method: '*', action: 'ALLOW', conditions: [] };
  const denyBig: PolicyRule = { name: 'deny big', method: '*', action: 'DENY', conditions: [msg('value', 'gt', '500')] };
  const denyAll: PolicyRule = { name: 'deny all', method: 'eth_signTypedData_v4', action: 'DENY', conditions: [] };
  const policy = (id: string, ...rules: PolicyRule[]) => ({ id, name: id, rules });

  it.each([
    ['no policies: default deny', [], '10', { allowed: false, rule: null, message: NO_ALLOWING_RULE }],
    ['no matching rule: default deny', [policy('p', allowSmall)], '1001', { allowed: false, rule: null, message: NO_ALLOWING_RULE }],
    ['a matching ALLOW', [policy('p', allowSmall)], '10', { allowed: true, rule: 'allow small', policyId: 'p' }],
    ['DENY wins over an earlier ALLOW', [policy('p', allowAll, denyBig)], '600', { allowed: false, rule: 'deny big', message: "Denied by policy rule 'deny big'" }],
    ['DENY in a later policy wins', [policy('p1', allowAll), policy('p2', denyBig)], '600', { allowed: false, rule: 'deny big', policyId: 'p2' }],
    ['a DENY that does not match does not deny', [policy('p', allowAll, denyBig)], '400', { allowed: true, rule: 'allow all' }],
    ['unconditional DENY', [policy('p', allowSmall, denyAll)], '1', { allowed: false, rule: 'deny all' }],
    ['first matching ALLOW is reported', [policy('p', allowSmall, allowAll)], '1', { allowed: true, rule: 'allow small' }],
  ])('%s', (_label, policies, value, expected) => {
    expect(evaluatePolicies(policies, request(value), ctx)).toMatchObject(expected);
  });

  it('skips rules whose typed_data does not match the request', () => {
    const permitOnly: PolicyRule = {
      name: 'permit only',
      method: '*',
      action: 'ALLOW',
      conditions: [],
      typed_data: { primary_type: 'Permit', types: { Permit: [{ name: 'owner', type: 'address' }] } },
    };
    expect(evaluatePolicies([policy('p', permitOnly)], request('1'), ctx)).toMatchObject({ allowed: false });
    const reordered: PolicyRule = {
      ...permitOnly,
      typed_data: {
        primary_type: 'TransferWithAuthorization',
        types: { TransferWithAuthorization: [...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization].reverse() },
      },
    };
    expect(evaluatePolicies([policy('p', reordered)], request('1'), ctx)).toMatchObject({ allowed: false });
  });

  describe('the default policy', () => {
    const defaults = [policy('default', ...defaultPolicyRules(DEFAULT_CHAINS))];
    it.each([
      ['5 USDC on Base', request('5000000'), true],
      ['0 USDC on Base', request('0'), true],
      ['5.000001 USDC on Base', request('5000001'), false],
      ['5 USDC on Base Sepolia', request('5000000', { chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' }), true],
      ['Base Sepolia USDC address on Base', request('1', { chainId: 8453, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' }), false],
      ['Ethereum mainnet', request('1', { chainId: 1 }), false],
      ['another token contract on Base', request('1', { verifyingContract: '0x4200000000000000000000000000000000000006' }), false],
      ['a non-USDC primary type', nestedRequest, false],
    ])('%s', (_label, req, allowed) => {
      expect(evaluatePolicies(defaults, req, ctx).allowed).toBe(allowed);
    });

    it('passes its own validation', () => {
      expect(() => validatePolicyRules(defaultPolicyRules(DEFAULT_CHAINS))).not.toThrow();
    });
  });
});

describe('validatePolicyRules', () => {
  const transfer = { primary_type: 'TransferWithAuthorization', types: TRANSFER_WITH_AUTHORIZATION_TYPES };
  const rule = (over: Partial<PolicyRule>): PolicyRule => ({ name: 'r', method: '*', action: 'ALLOW', conditions: [], ...over });

  it.each([
    [
      'duplicate rule names',
      [rule({}), rule({})],
      "rules[1].name: duplicate rule name 'r'",
    ],
    [
      'message condition without typed_data',
      [rule({ conditions: [msg('value', 'lte', '5')] })],
      "rules[0].conditions[0]: field_source ethereum_typed_data_message needs the rule's typed_data (types and primary_type) to resolve 'value'",
    ],
    [
      'message path not in the types',
      [rule({ typed_data: transfer, conditions: [msg('amount', 'lte', '5')] })],
      "rules[0].conditions[0].field: 'amount' is not a field of TransferWithAuthorization",
    ],
    [
      'path through an atomic field',
      [rule({ typed_data: transfer, conditions: [msg('to.wallet', 'eq', '0x0000000000000000000000000000000000000001')] })],
      "rules[0].conditions[0].field: 'TransferWithAuthorization.to' is of type address, it has no field 'wallet'",
    ],
    [
      'unknown domain field',
      [rule({ conditions: [cond('ethereum_typed_data_domain', 'chain', 'eq', 1)] })],
      "rules[0].conditions[0].field: 'chain' is not a domain field (name, version, chainId, verifyingContract, salt)",
    ],
    [
      'unknown system field',
      [rule({ conditions: [cond('system', 'now', 'gt', 1)] })],
      "rules[0].conditions[0].field: 'now' is not a system field (current_unix_timestamp)",
    ],
    [
      'in with a scalar',
      [rule({ conditions: [cond('ethereum_typed_data_domain', 'chainId', 'in', 8453)] })],
      "rules[0].conditions[0].value: operator 'in' needs an array of values",
    ],
    [
      'eq with an array',
      [rule({ conditions: [cond('ethereum_typed_data_domain', 'chainId', 'eq', [8453])] })],
      "rules[0].conditions[0].value: operator 'eq' needs a single value, not an array (use 'in')",
    ],
    [
      'gt on an address',
      [rule({ typed_data: transfer, conditions: [msg('to', 'gt', '0x0000000000000000000000000000000000000001')] })],
      "rules[0].conditions[0].operator: 'gt' compares integers; 'to' is not an integer field",
    ],
    [
      'a non-integer value for a uint256',
      [rule({ typed_data: transfer, conditions: [msg('value', 'lte', '5.5')] })],
      'rules[0].conditions[0].value: expected an integer (JSON integer or decimal string), got "5.5"',
    ],
    [
      'a non-address value for an address',
      [rule({ conditions: [cond('ethereum_typed_data_domain', 'verifyingContract', 'eq', 'USDC')] })],
      'rules[0].conditions[0].value: expected an address (0x + 40 hex characters), got "USDC"',
    ],
    [
      'an invalid element of an in list',
      [rule({ conditions: [cond('ethereum_typed_data_domain', 'chainId', 'in', [8453, 'base'])] })],
      'rules[0].conditions[0].value[1]: expected an integer (JSON integer or decimal string), got "base"',
    ],
    [
      'typed_data without its primary type',
      [rule({ typed_data: { primary_type: 'Permit', types: TRANSFER_WITH_AUTHORIZATION_TYPES } })],
      "rules[0].typed_data.types must define the primary type 'Permit'",
    ],
    [
      'typed_data with an unknown field type',
      [rule({ typed_data: { primary_type: 'A', types: { A: [{ name: 'b', type: 'Bee' }] } } })],
      "rules[0].typed_data.types.A[0]: unknown type 'Bee' (not a Solidity type and not defined in types)",
    ],
    [
      'typed_data with an invalid integer width',
      [rule({ typed_data: { primary_type: 'A', types: { A: [{ name: 'b', type: 'uint7' }] } } })],
      "rules[0].typed_data.types.A[0]: unknown type 'uint7' (not a Solidity type and not defined in types)",
    ],
    [
      'a path that ends on an array',
      [rule({ typed_data: { primary_type: 'A', types: { A: [{ name: 'b', type: 'uint256[]' }] } }, conditions: [msg('b', 'eq', '1')] })],
      "rules[0].conditions[0].field: 'b' is of type uint256[]; a condition must reach a single value",
    ],
    [
      'an array index that is not a number',
      [rule({ typed_data: { primary_type: 'A', types: { A: [{ name: 'b', type: 'uint256[]' }] } }, conditions: [msg('b.x', 'eq', '1')] })],
      "rules[0].conditions[0].field: 'A.b' is an array (uint256[]); 'x' is not an index",
    ],
  ])('refuses %s', (_label, rules, message) => {
    expect(() => validatePolicyRules(rules)).toThrow(message);
  });

  it('accepts a path into nested structs and arrays with matching values', () => {
    expect(() =>
      validatePolicyRules([
        rule({
          typed_data: { primary_type: 'Order', types: nestedRequest.typedData.types },
          conditions: [
            msg('payee.wallet', 'in', ['0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359']),
            msg('items.0.amount', 'lte', '1000'),
            msg('express', 'eq', 'false'),
            cond('system', 'current_unix_timestamp', 'lt', 1_900_000_000),
          ],
        }),
      ]),
    ).not.toThrow();
  });
});

describe('spend limits: which apply', () => {
  const limits = [
    { name: 'base usdc', window_hours: 24, max_value: '20000000', chain_id: 8453, verifying_contract: BASE_USDC.toLowerCase() },
    { name: 'any chain', window_hours: 1, max_value: '100' },
    { name: 'sepolia', window_hours: 1, max_value: '1', chain_id: 84532 },
  ];
  const policies = [{ id: 'p', name: 'p', rules: [], spendLimits: limits }];

  it('reads chain, lower-case contract and value of a TransferWithAuthorization only', () => {
    expect(transferFacts(request('2500000').typedData)).toEqual({ chainId: 8453n, contract: BASE_USDC.toLowerCase(), value: 2500000n });
    expect(transferFacts(nestedRequest.typedData)).toBeUndefined();
  });

  it.each([
    ['Base USDC', request('1'), ['base usdc', 'any chain']],
    ['another token on Base', request('1', { verifyingContract: '0x4200000000000000000000000000000000000006' }), ['any chain']],
    ['Base Sepolia', request('1', { chainId: 84532 }), ['any chain', 'sepolia']],
  ])('%s', (_label, req, names) => {
    expect(applicableSpendLimits(policies, transferFacts(req.typedData)!).map((l) => l.name)).toEqual(names);
  });

  it('names the limit, the window sum and the request in its denial', () => {
    expect(spendLimitExceeded({ name: 'x', windowHours: 24, maxValue: 5n }, 4n, 2n)).toBe(
      "Denied by spend limit 'x': 4 signed in the last 24 h + 2 requested exceeds 5",
    );
  });

  it('refuses duplicate limit names', () => {
    expect(() => validateSpendLimits([limits[1]!, limits[1]!])).toThrow("spend_limits[1].name: duplicate spend limit name 'any chain'");
  });
});
