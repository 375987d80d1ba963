/**
 * Wallet policies (the shape Privy uses) as pure functions: validation at creation, evaluation
 * at signing. No I/O and no clock: the caller passes the current time in.
 *
 * Evaluation: a rule matches when its method fits, its `typed_data` (if any) matches the
 * request's, and all its conditions hold. Any matching DENY wins; else any matching ALLOW
 * allows; else the request is denied.
 */
import type { components } from '../../generated/agent-wallet.js';
import {
  DOMAIN_FIELD_TYPES,
  parseType,
  toBigInt,
  TypedDataError,
  validateTypes,
  type SolidityType,
  type TypedDataInput,
  type TypedDataTypes,
} from './typed-data.js';

export type PolicyRule = components['schemas']['PolicyRule'];
export type SpendLimit = components['schemas']['SpendLimit'];
export type PolicyCondition = components['schemas']['PolicyCondition'];

export interface PolicyForEvaluation {
  id: string;
  name: string;
  rules: PolicyRule[];
  spendLimits?: SpendLimit[];
}

export interface SigningRequest {
  method: 'eth_signTypedData_v4';
  typedData: TypedDataInput;
}

export interface EvaluationContext {
  /** Server time in Unix seconds (from the Clock). */
  nowUnix: number;
}

export type Decision =
  | { allowed: true; policyId: string; rule: string }
  | { allowed: false; policyId: string | null; rule: string | null; message: string };

export const NO_ALLOWING_RULE = 'No policy rule allows this request';
export const deniedByRule = (name: string) => `Denied by policy rule '${name}'`;

export const SYSTEM_FIELDS = ['current_unix_timestamp'] as const;

// ---------------------------------------------------------------------------------------------
// Evaluation

type Scalar = string | number | boolean;
const ABSENT = Symbol('absent');

/** Reads `a.b.0.c` from a JSON value; array elements by decimal index. */
export function readPath(root: unknown, path: string): unknown {
  let current: unknown = root;
  for (const segment of path.split('.')) {
    if (Array.isArray(current)) {
      if (!/^(0|[1-9][0-9]*)$/.test(segment)) return ABSENT;
      const index = Number(segment);
      if (index >= current.length) return ABSENT;
      current = current[index];
    } else if (typeof current === 'object' && current !== null && Object.hasOwn(current, segment)) {
      current = (current as Record<string, unknown>)[segment];
    } else {
      return ABSENT;
    }
  }
  return current;
}

function fieldValue(condition: PolicyCondition, request: SigningRequest, ctx: EvaluationContext): unknown {
  switch (condition.field_source) {
    case 'ethereum_typed_data_domain':
      return Object.hasOwn(DOMAIN_FIELD_TYPES, condition.field)
        ? ((request.typedData.domain as Record<string, unknown>)[condition.field] ?? ABSENT)
        : ABSENT;
    case 'ethereum_typed_data_message':
      return readPath(request.typedData.message, condition.field);
    case 'system':
      return condition.field === 'current_unix_timestamp' ? ctx.nowUnix : ABSENT;
    default:
      return ABSENT;
  }
}

const HEXLIKE = /^0x[0-9a-fA-F]*$/;

function equals(field: Scalar, expected: string | number): boolean {
  const a = toBigInt(field);
  const b = toBigInt(expected);
  if (a !== undefined && b !== undefined) return a === b;
  const left = String(field);
  const right = String(expected);
  // Addresses and other hex byte strings: checksum casing carries no meaning for equality.
  if (HEXLIKE.test(left) && HEXLIKE.test(right)) return left.toLowerCase() === right.toLowerCase();
  return left === right;
}

function ordered(field: Scalar, expected: string | number, op: 'gt' | 'gte' | 'lt' | 'lte'): boolean {
  const a = toBigInt(field);
  const b = toBigInt(expected);
  if (a === undefined || b === undefined) return false;
  switch (op) {
    case 'gt':
      return a > b;
    case 'gte':
      return a >= b;
    case 'lt':
      return a < b;
    case 'lte':
      return a <= b;
  }
}

/** Whether one condition holds. Absent fields and non-scalar values never satisfy a condition. */
export function conditionHolds(condition: PolicyCondition, request: SigningRequest, ctx: EvaluationContext): boolean {
  const raw = fieldValue(condition, request, ctx);
  if (raw === ABSENT || raw === null || (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean')) {
    return false;
  }
  const { operator, value } = condition;
  if (operator === 'in') return Array.isArray(value) && value.some((v) => equals(raw, v));
  if (Array.isArray(value)) return false;
  if (operator === 'eq') return equals(raw, value);
  if (operator === 'gt' || operator === 'gte' || operator === 'lt' || operator === 'lte') return ordered(raw, value, operator);
  return false;
}

function sameFields(a: TypedDataTypes[string] | undefined, b: TypedDataTypes[string]): boolean {
  return !!a && a.length === b.length && a.every((f, i) => f.name === b[i]!.name && f.type === b[i]!.type);
}

/** A rule's `typed_data` matches when the primary type and every type it defines agree. */
export function typedDataMatches(rule: PolicyRule, typedData: TypedDataInput): boolean {
  if (!rule.typed_data) return true;
  if (rule.typed_data.primary_type !== typedData.primary_type) return false;
  return Object.entries(rule.typed_data.types).every(
    ([name, fields]) => name === 'EIP712Domain' || sameFields(typedData.types[name], fields),
  );
}

export function ruleMatches(rule: PolicyRule, request: SigningRequest, ctx: EvaluationContext): boolean {
  if (rule.method !== '*' && rule.method !== request.method) return false;
  if (!typedDataMatches(rule, request.typedData)) return false;
  return rule.conditions.every((c) => conditionHolds(c, request, ctx));
}

/** DENY beats ALLOW, ALLOW beats nothing, nothing is a denial. Policies and rules in order. */
export function evaluatePolicies(policies: PolicyForEvaluation[], request: SigningRequest, ctx: EvaluationContext): Decision {
  let allowedBy: { policyId: string; rule: string } | undefined;
  for (const policy of policies) {
    for (const rule of policy.rules) {
      if (!ruleMatches(rule, request, ctx)) continue;
      if (rule.action === 'DENY') return { allowed: false, policyId: policy.id, rule: rule.name, message: deniedByRule(rule.name) };
      allowedBy ??= { policyId: policy.id, rule: rule.name };
    }
  }
  if (allowedBy) return { allowed: true, ...allowedBy };
  return { allowed: false, policyId: null, rule: null, message: NO_ALLOWING_RULE };
}

// ---------------------------------------------------------------------------------------------
// Spend limits: which apply is pure; the sums come from the history (the caller's job).

export const SPEND_LIMITED_TYPE = 'TransferWithAuthorization';

export interface TransferFacts {
  chainId: bigint;
  /** Lower-case token contract. */
  contract: string;
  value: bigint;
}

/** Chain, token and value of an EIP-3009 transfer authorization, or undefined for anything else. */
export function transferFacts(typedData: TypedDataInput): TransferFacts | undefined {
  if (typedData.primary_type !== SPEND_LIMITED_TYPE) return undefined;
  const chainId = toBigInt(typedData.domain.chainId);
  const contract = typedData.domain.verifyingContract;
  const value = toBigInt(typedData.message.value);
  if (chainId === undefined || !contract || value === undefined) return undefined;
  return { chainId, contract: contract.toLowerCase(), value };
}

export interface ApplicableLimit {
  name: string;
  windowHours: number;
  maxValue: bigint;
}

/** The spend limits of all policies that cover this transfer. */
export function applicableSpendLimits(policies: PolicyForEvaluation[], transfer: TransferFacts): ApplicableLimit[] {
  const out: ApplicableLimit[] = [];
  for (const policy of policies) {
    for (const limit of policy.spendLimits ?? []) {
      if (limit.chain_id !== undefined && BigInt(limit.chain_id) !== transfer.chainId) continue;
      if (limit.verifying_contract !== undefined && limit.verifying_contract.toLowerCase() !== transfer.contract) continue;
      out.push({ name: limit.name, windowHours: limit.window_hours, maxValue: BigInt(limit.max_value) });
    }
  }
  return out;
}

export const spendLimitExceeded = (limit: ApplicableLimit, spent: bigint, requested: bigint) =>
  `Denied by spend limit '${limit.name}': ${spent} signed in the last ${limit.windowHours} h + ${requested} requested exceeds ${limit.maxValue}`;

// ---------------------------------------------------------------------------------------------
// Validation (at creation: a policy that cannot mean what its author thinks is refused)

export class PolicyValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyValidationError';
  }
}

/** What a condition's field can hold, which decides the operators and values that make sense. */
type FieldKind = 'integer' | 'address' | 'hex' | 'string' | 'bool';

function kindOfType(type: SolidityType): FieldKind | undefined {
  if (type.kind !== 'atomic') return undefined;
  switch (type.atomic.kind) {
    case 'uint':
    case 'int':
      return 'integer';
    case 'address':
      return 'address';
    case 'bytes':
      return 'hex';
    case 'bool':
      return 'bool';
    case 'string':
      return 'string';
  }
}

/** Follows a dot path through the rule's types to the Solidity type it reaches. */
function resolveMessagePath(types: TypedDataTypes, primaryType: string, path: string, where: string): SolidityType {
  let current: SolidityType = { kind: 'struct', name: primaryType };
  let walked = primaryType;
  for (const segment of path.split('.')) {
    if (current.kind === 'array') {
      if (!/^(0|[1-9][0-9]*)$/.test(segment)) {
        throw new PolicyValidationError(`${where}.field: '${walked}' is an array (${current.name}); '${segment}' is not an index`);
      }
      if (current.length !== null && Number(segment) >= current.length) {
        throw new PolicyValidationError(`${where}.field: index ${segment} is beyond ${current.name}`);
      }
      current = current.element;
    } else if (current.kind === 'struct') {
      const field: { name: string; type: string } | undefined = types[current.name]!.find((f) => f.name === segment);
      if (!field) throw new PolicyValidationError(`${where}.field: '${segment}' is not a field of ${current.name}`);
      current = parseType(field.type, types)!;
    } else {
      throw new PolicyValidationError(`${where}.field: '${walked}' is of type ${current.name}, it has no field '${segment}'`);
    }
    walked = `${walked}.${segment}`;
  }
  if (current.kind !== 'atomic') {
    throw new PolicyValidationError(`${where}.field: '${path}' is of type ${current.name}; a condition must reach a single value`);
  }
  return current;
}

function fieldKind(condition: PolicyCondition, rule: PolicyRule, where: string): FieldKind {
  switch (condition.field_source) {
    case 'ethereum_typed_data_domain': {
      const type = DOMAIN_FIELD_TYPES[condition.field];
      if (!type || !Object.hasOwn(DOMAIN_FIELD_TYPES, condition.field)) {
        throw new PolicyValidationError(
          `${where}.field: '${condition.field}' is not a domain field (${Object.keys(DOMAIN_FIELD_TYPES).join(', ')})`,
        );
      }
      return kindOfType(parseType(type, {})!)!;
    }
    case 'ethereum_typed_data_message': {
      if (!rule.typed_data) {
        throw new PolicyValidationError(
          `${where}: field_source ethereum_typed_data_message needs the rule's typed_data (types and primary_type) to resolve '${condition.field}'`,
        );
      }
      return kindOfType(resolveMessagePath(rule.typed_data.types, rule.typed_data.primary_type, condition.field, where))!;
    }
    case 'system':
      if (!(SYSTEM_FIELDS as readonly string[]).includes(condition.field)) {
        throw new PolicyValidationError(`${where}.field: '${condition.field}' is not a system field (${SYSTEM_FIELDS.join(', ')})`);
      }
      return 'integer';
  }
}

function checkValue(kind: FieldKind, value: string | number, where: string): void {
  switch (kind) {
    case 'integer':
      if (toBigInt(value) === undefined) {
        throw new PolicyValidationError(`${where}: expected an integer (JSON integer or decimal string), got ${JSON.stringify(value)}`);
      }
      return;
    case 'address':
      if (typeof value !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(value)) {
        throw new PolicyValidationError(`${where}: expected an address (0x + 40 hex characters), got ${JSON.stringify(value)}`);
      }
      return;
    case 'hex':
      if (typeof value !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(value)) {
        throw new PolicyValidationError(`${where}: expected 0x-prefixed hex bytes, got ${JSON.stringify(value)}`);
      }
      return;
    case 'bool':
      if (value !== 'true' && value !== 'false') {
        throw new PolicyValidationError(`${where}: expected "true" or "false" for a bool field, got ${JSON.stringify(value)}`);
      }
      return;
    case 'string':
      if (typeof value !== 'string') throw new PolicyValidationError(`${where}: expected a string, got ${JSON.stringify(value)}`);
      return;
  }
}

function validateCondition(condition: PolicyCondition, rule: PolicyRule, where: string): void {
  const kind = fieldKind(condition, rule, where);
  const { operator, value } = condition;
  if (operator === 'in') {
    if (!Array.isArray(value)) throw new PolicyValidationError(`${where}.value: operator 'in' needs an array of values`);
    value.forEach((v, i) => checkValue(kind, v, `${where}.value[${i}]`));
    return;
  }
  if (Array.isArray(value)) {
    throw new PolicyValidationError(`${where}.value: operator '${operator}' needs a single value, not an array (use 'in')`);
  }
  if (operator !== 'eq' && kind !== 'integer') {
    throw new PolicyValidationError(
      `${where}.operator: '${operator}' compares integers; '${condition.field}' is not an integer field`,
    );
  }
  checkValue(kind, value, `${where}.value`);
}

/**
 * Refuses rules that could never do what they say: unknown fields, message paths that do not
 * exist in the rule's types, operators that cannot apply, values of the wrong kind, duplicate
 * rule names (a denial quotes the rule's name, so it must identify one rule).
 */
export function validateSpendLimits(limits: SpendLimit[]): void {
  const names = new Set<string>();
  limits.forEach((limit, i) => {
    if (names.has(limit.name)) throw new PolicyValidationError(`spend_limits[${i}].name: duplicate spend limit name '${limit.name}'`);
    names.add(limit.name);
  });
}

export function validatePolicyRules(rules: PolicyRule[]): void {
  const names = new Set<string>();
  rules.forEach((rule, r) => {
    const where = `rules[${r}]`;
    if (names.has(rule.name)) throw new PolicyValidationError(`${where}.name: duplicate rule name '${rule.name}'`);
    names.add(rule.name);
    if (rule.typed_data) {
      try {
        validateTypes(rule.typed_data.types, rule.typed_data.primary_type, `${where}.typed_data`);
      } catch (err) {
        if (err instanceof TypedDataError) throw new PolicyValidationError(err.message);
        throw err;
      }
    }
    rule.conditions.forEach((condition, c) => validateCondition(condition, rule, `${where}.conditions[${c}]`));
  });
}
