/**
 * EIP-712 typed data as the agent sends it, checked against its own `types` before anything is
 * signed: the wallet must never sign bytes whose meaning differs from what the policies saw.
 * Pure functions; errors name the offending JSON path.
 */
import { checksumAddress } from 'viem';
import type { components } from '../../generated/agent-wallet.js';

export type TypedDataInput = components['schemas']['TypedData'];
export type TypedDataTypes = components['schemas']['TypedDataTypes'];
export type TypedDataField = components['schemas']['TypedDataField'];

export class TypedDataError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TypedDataError';
  }
}

/** What viem's signTypedData / hashTypedData take: integers as bigint, hex in lower case. */
export interface ViemTypedData {
  domain: Record<string, unknown>;
  types: Record<string, TypedDataField[]>;
  primaryType: string;
  message: Record<string, unknown>;
}

export const DOMAIN_FIELD_TYPES: Record<string, string> = {
  name: 'string',
  version: 'string',
  chainId: 'uint256',
  verifyingContract: 'address',
  salt: 'bytes32',
};
const DOMAIN_FIELD_ORDER = Object.keys(DOMAIN_FIELD_TYPES);

/** Struct nesting allowed in a message; recursive types could otherwise nest until the stack breaks. */
const MAX_DEPTH = 32;
const MAX_FIXED_ARRAY = 1024;

export type AtomicType =
  | { kind: 'uint' | 'int'; bits: number }
  | { kind: 'bytes'; size: number | null }
  | { kind: 'address' | 'bool' | 'string' };

export type SolidityType =
  | { kind: 'atomic'; atomic: AtomicType; name: string }
  | { kind: 'array'; element: SolidityType; length: number | null; name: string }
  | { kind: 'struct'; name: string };

export function parseAtomic(name: string): AtomicType | undefined {
  if (name === 'address' || name === 'bool' || name === 'string') return { kind: name };
  if (name === 'bytes') return { kind: 'bytes', size: null };
  let m = /^bytes([1-9][0-9]?)$/.exec(name);
  if (m) {
    const size = Number(m[1]);
    return size <= 32 ? { kind: 'bytes', size } : undefined;
  }
  m = /^(u?int)([1-9][0-9]{0,2})$/.exec(name);
  if (m) {
    const bits = Number(m[2]);
    if (bits % 8 !== 0 || bits > 256) return undefined;
    return { kind: m[1] === 'uint' ? 'uint' : 'int', bits };
  }
  return undefined;
}

/** Resolves a field type against `types`; undefined when it names nothing. */
export function parseType(name: string, types: TypedDataTypes): SolidityType | undefined {
  const array = /^(.*)\[([0-9]*)\]$/.exec(name);
  if (array) {
    const element = parseType(array[1]!, types);
    if (!element) return undefined;
    if (array[2] === '') return { kind: 'array', element, length: null, name };
    const length = Number(array[2]);
    if (!/^[1-9][0-9]*$/.test(array[2]!) || length > MAX_FIXED_ARRAY) return undefined;
    return { kind: 'array', element, length, name };
  }
  const atomic = parseAtomic(name);
  if (atomic) return { kind: 'atomic', atomic, name };
  if (name !== 'EIP712Domain' && Object.hasOwn(types, name)) return { kind: 'struct', name };
  return undefined;
}

/**
 * Checks the type definitions themselves: unique field names, every field type atomic or a
 * defined struct, and `primaryType` defined. `where` prefixes messages (`typed_data`, `rules[0].typed_data`).
 */
export function validateTypes(types: TypedDataTypes, primaryType: string, where: string): void {
  if (primaryType === 'EIP712Domain') throw new TypedDataError(`${where}.primary_type must not be EIP712Domain`);
  if (!Object.hasOwn(types, primaryType)) {
    throw new TypedDataError(`${where}.types must define the primary type '${primaryType}'`);
  }
  for (const [typeName, fields] of Object.entries(types)) {
    if (typeName === 'EIP712Domain') continue;
    if (parseAtomic(typeName)) throw new TypedDataError(`${where}.types.${typeName}: a struct cannot be named after a Solidity type`);
    const seen = new Set<string>();
    fields.forEach((field, i) => {
      if (seen.has(field.name)) throw new TypedDataError(`${where}.types.${typeName}[${i}]: duplicate field name '${field.name}'`);
      seen.add(field.name);
      if (!parseType(field.type, types)) {
        throw new TypedDataError(
          `${where}.types.${typeName}[${i}]: unknown type '${field.type}' (not a Solidity type and not defined in types)`,
        );
      }
    });
  }
}

const UINT_MAX = (bits: number) => (1n << BigInt(bits)) - 1n;
const DECIMAL = /^-?(0|[1-9][0-9]*)$/;
const HEX = /^0x([0-9a-fA-F]{2})*$/;

/** A JSON integer or decimal string as a bigint; undefined when it is neither. */
export function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  if (typeof value === 'string' && value.length <= 80 && DECIMAL.test(value) && value !== '-0') return BigInt(value);
  return undefined;
}

/** EIP-55: all-lower or all-upper hex carries no checksum; mixed case must be the checksum. */
export function isValidAddress(value: unknown): value is string {
  if (typeof value !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(value)) return false;
  const hex = value.slice(2);
  if (hex === hex.toLowerCase() || hex === hex.toUpperCase()) return true;
  return checksumAddress(value as `0x${string}`) === value;
}

function addressError(path: string, value: unknown): TypedDataError {
  if (typeof value === 'string' && /^0x[0-9a-fA-F]{40}$/.test(value)) {
    return new TypedDataError(`${path}: mixed-case address fails its EIP-55 checksum`);
  }
  return new TypedDataError(`${path}: expected address (0x + 40 hex characters)`);
}

function normalizeAtomic(atomic: AtomicType, typeName: string, value: unknown, path: string): unknown {
  switch (atomic.kind) {
    case 'uint':
    case 'int': {
      const n = toBigInt(value);
      if (n === undefined) {
        throw new TypedDataError(`${path}: expected ${typeName} (JSON integer or decimal string)`);
      }
      const [min, max] =
        atomic.kind === 'uint'
          ? [0n, UINT_MAX(atomic.bits)]
          : [-(1n << BigInt(atomic.bits - 1)), (1n << BigInt(atomic.bits - 1)) - 1n];
      if (n < min || n > max) throw new TypedDataError(`${path}: ${n} is out of range for ${typeName}`);
      return n;
    }
    case 'address':
      if (!isValidAddress(value)) throw addressError(path, value);
      return value.toLowerCase();
    case 'bool':
      if (typeof value !== 'boolean') throw new TypedDataError(`${path}: expected bool (true or false)`);
      return value;
    case 'string':
      if (typeof value !== 'string') throw new TypedDataError(`${path}: expected string`);
      return value;
    case 'bytes': {
      if (typeof value !== 'string' || !HEX.test(value)) {
        throw new TypedDataError(`${path}: expected ${typeName} as 0x-prefixed hex`);
      }
      if (atomic.size !== null && value.length !== 2 + 2 * atomic.size) {
        throw new TypedDataError(`${path}: expected ${typeName} (exactly ${atomic.size} bytes)`);
      }
      return value.toLowerCase();
    }
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function normalizeValue(type: SolidityType, value: unknown, types: TypedDataTypes, path: string, depth: number): unknown {
  if (depth > MAX_DEPTH) throw new TypedDataError(`${path}: nested deeper than ${MAX_DEPTH} levels`);
  switch (type.kind) {
    case 'atomic':
      return normalizeAtomic(type.atomic, type.name, value, path);
    case 'array': {
      if (!Array.isArray(value)) throw new TypedDataError(`${path}: expected ${type.name} (JSON array)`);
      if (type.length !== null && value.length !== type.length) {
        throw new TypedDataError(`${path}: expected ${type.length} elements for ${type.name}, got ${value.length}`);
      }
      return value.map((item, i) => normalizeValue(type.element, item, types, `${path}[${i}]`, depth + 1));
    }
    case 'struct':
      return normalizeStruct(type.name, value, types, path, depth + 1);
  }
}

function normalizeStruct(name: string, value: unknown, types: TypedDataTypes, path: string, depth: number): Record<string, unknown> {
  if (!isPlainObject(value)) throw new TypedDataError(`${path}: expected ${name} (JSON object)`);
  const fields = types[name]!;
  const declared = new Set(fields.map((f) => f.name));
  for (const key of Object.keys(value)) {
    if (!declared.has(key)) throw new TypedDataError(`${path}.${key}: not a field of ${name}`);
  }
  const out: Record<string, unknown> = {};
  for (const field of fields) {
    if (!Object.hasOwn(value, field.name)) throw new TypedDataError(`${path}: missing field '${field.name}' of ${name}`);
    out[field.name] = normalizeValue(parseType(field.type, types)!, value[field.name], types, `${path}.${field.name}`, depth);
  }
  return out;
}

function normalizeDomain(td: TypedDataInput): Record<string, unknown> {
  const domain: Record<string, unknown> = {};
  const given = td.domain as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(DOMAIN_FIELD_TYPES, key)) throw new TypedDataError(`typed_data.domain.${key}: not an EIP-712 domain field`);
  }
  if (given.name !== undefined) domain.name = normalizeAtomic({ kind: 'string' }, 'string', given.name, 'typed_data.domain.name');
  if (given.version !== undefined) {
    domain.version = normalizeAtomic({ kind: 'string' }, 'string', given.version, 'typed_data.domain.version');
  }
  if (given.chainId !== undefined) {
    const chainId = toBigInt(given.chainId);
    if (chainId === undefined || chainId < 1n || chainId > UINT_MAX(256)) {
      throw new TypedDataError('typed_data.domain.chainId: expected a positive integer (JSON integer up to 2^53 - 1, or decimal string)');
    }
    domain.chainId = chainId;
  }
  if (given.verifyingContract !== undefined) {
    domain.verifyingContract = normalizeAtomic({ kind: 'address' }, 'address', given.verifyingContract, 'typed_data.domain.verifyingContract');
  }
  if (given.salt !== undefined) {
    domain.salt = normalizeAtomic({ kind: 'bytes', size: 32 }, 'bytes32', given.salt, 'typed_data.domain.salt');
  }
  return domain;
}

/** A declared EIP712Domain must list exactly the domain's fields, each with its standard type. */
function checkDomainType(td: TypedDataInput, domain: Record<string, unknown>): void {
  const declared = td.types.EIP712Domain;
  if (!declared) return;
  const present = DOMAIN_FIELD_ORDER.filter((k) => domain[k] !== undefined);
  const names = declared.map((f) => f.name);
  const sameSet = names.length === present.length && new Set(names).size === names.length && present.every((k) => names.includes(k));
  if (!sameSet) {
    throw new TypedDataError(
      `typed_data.types.EIP712Domain must declare exactly the fields present in domain (${present.join(', ') || 'none'})`,
    );
  }
  declared.forEach((field, i) => {
    const expected = DOMAIN_FIELD_TYPES[field.name];
    if (field.type !== expected) {
      throw new TypedDataError(`typed_data.types.EIP712Domain[${i}]: ${field.name} must have type ${expected}, not ${field.type}`);
    }
  });
}

/**
 * Validates typed data against its own types and returns it in the form viem signs.
 * Throws TypedDataError with a message naming the offending path.
 */
export function validateTypedData(td: TypedDataInput): ViemTypedData {
  validateTypes(td.types, td.primary_type, 'typed_data');
  const domain = normalizeDomain(td);
  checkDomainType(td, domain);
  const message = normalizeStruct(td.primary_type, td.message, td.types, 'typed_data.message', 0);
  return { domain, types: td.types, primaryType: td.primary_type, message };
}
