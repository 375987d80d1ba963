/**
 * fast-check arbitraries from the JSON Schema subset our OpenAPI documents use (dereferenced):
 * objects with properties/required/additionalProperties (false or a value schema), strings with
 * length/pattern/format/enum/const, integers and numbers with bounds, booleans, null, arrays,
 * allOf (merged), oneOf/anyOf (one branch merged into its parent; properties only other oneOf
 * branches require are left out), type unions. `not` and `if/then/else` are not solved: a sample
 * may break them, which the fuzz test tolerates (it only demands a documented, non-5xx answer).
 * Plus the deliberate violations of a valid value: wrong types, unknown fields at each depth,
 * oversized and hostile strings, huge numbers, nulls.
 */
import fc, { type Arbitrary } from 'fast-check';

export type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  propertyNames?: Schema;
  minProperties?: number;
  maxProperties?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  enum?: unknown[];
  const?: unknown;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
  if?: Schema;
  then?: Schema;
  else?: Schema;
  default?: unknown;
  examples?: unknown[];
  [key: string]: unknown;
};

const MAX_DEPTH = 6;
const MAX_ARRAY = 4;
const MAX_MAP_KEYS = 4;

function merge(base: Schema, extra: Schema): Schema {
  const out: Schema = { ...base, ...extra };
  if (base.properties || extra.properties) out.properties = { ...base.properties, ...extra.properties };
  if (base.required || extra.required) out.required = [...new Set([...(base.required ?? []), ...(extra.required ?? [])])];
  return out;
}

function typesOf(schema: Schema): string[] {
  if (Array.isArray(schema.type)) return schema.type;
  if (schema.type) return [schema.type];
  if (schema.properties || schema.additionalProperties !== undefined) return ['object'];
  if (schema.items) return ['array'];
  if (schema.pattern || schema.minLength !== undefined || schema.maxLength !== undefined || schema.format) return ['string'];
  if (schema.minimum !== undefined || schema.maximum !== undefined) return ['number'];
  return [];
}

/**
 * Real values (identifiers of existing resources) mixed into strings whose pattern they match,
 * so generated requests also reach existing resources instead of only unknown ones.
 */
let knownValues: string[] = [];
export function setKnownValues(values: string[]): void {
  knownValues = values;
}

function stringArbitrary(schema: Schema): Arbitrary<string> {
  const generated = generatedString(schema);
  if (!schema.pattern) return generated;
  const pattern = new RegExp(schema.pattern, 'u');
  const matching = knownValues.filter((v) => pattern.test(v) && [...v].length <= (schema.maxLength ?? Infinity) && [...v].length >= (schema.minLength ?? 0));
  return matching.length > 0 ? fc.oneof(generated, fc.constantFrom(...matching)) : generated;
}

function generatedString(schema: Schema): Arbitrary<string> {
  const min = schema.minLength ?? 0;
  // Without maxLength, a pattern or format bounds the length itself; free text is kept short.
  const max = schema.maxLength ?? (schema.pattern || schema.format ? Infinity : Math.max(min, 40));
  const fits = (s: string) => [...s].length >= min && [...s].length <= max;
  let base: Arbitrary<string>;
  if (schema.pattern) base = fc.stringMatching(new RegExp(schema.pattern, 'u'));
  else if (schema.format === 'email') base = fc.emailAddress().map((e) => e.slice(-Math.min(max, 254)));
  else if (schema.format === 'date-time')
    base = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
  else if (schema.format === 'date')
    base = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString().slice(0, 10));
  else if (schema.format === 'uri' || schema.format === 'url') base = fc.webUrl({ validSchemes: ['https'] });
  else if (schema.format === 'uuid') base = fc.uuid();
  else base = fc.oneof(fc.string({ minLength: min, maxLength: Math.max(min, Math.min(max, 40)) }), fc.string({ unit: 'grapheme', minLength: min, maxLength: Math.max(min, Math.min(max, 20)) }));
  // Patterns and formats ignore lengths; most samples fit, the rest are regenerated.
  return base.filter(fits);
}

function integerArbitrary(schema: Schema): Arbitrary<number> {
  let min = schema.minimum ?? -1_000_000;
  let max = schema.maximum ?? Math.max(min, 0) + 1_000_000;
  if (schema.exclusiveMinimum !== undefined) min = Math.max(min, Math.floor(schema.exclusiveMinimum) + 1);
  if (schema.exclusiveMaximum !== undefined) max = Math.min(max, Math.ceil(schema.exclusiveMaximum) - 1);
  min = Math.max(min, Number.MIN_SAFE_INTEGER);
  max = Math.min(max, Number.MAX_SAFE_INTEGER);
  // Bounds are the interesting values: weight them.
  return fc.oneof(
    { arbitrary: fc.bigInt({ min: BigInt(Math.ceil(min)), max: BigInt(Math.floor(max)) }).map(Number), weight: 4 },
    { arbitrary: fc.constantFrom(min, max), weight: 1 },
  );
}

function numberArbitrary(schema: Schema): Arbitrary<number> {
  const min = schema.minimum ?? schema.exclusiveMinimum ?? -1e9;
  const max = schema.maximum ?? schema.exclusiveMaximum ?? 1e9;
  return fc
    .double({ min, max, noNaN: true, noDefaultInfinity: true })
    .filter((n) => (schema.exclusiveMinimum === undefined || n > schema.exclusiveMinimum) && (schema.exclusiveMaximum === undefined || n < schema.exclusiveMaximum))
    .map((n) => (Object.is(n, -0) ? 0 : n));
}

function objectArbitrary(schema: Schema, depth: number): Arbitrary<Record<string, unknown>> {
  const properties = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const excluded = new Set((schema['x-fuzz-exclude'] as string[] | undefined) ?? []);
  const entries = Object.entries(properties).filter(([name, prop]) => !excluded.has(name) && prop !== (false as unknown));
  // Deep optional members are dropped past MAX_DEPTH so recursion ends.
  const model: Record<string, Arbitrary<unknown>> = {};
  for (const [name, prop] of entries) {
    if (depth >= MAX_DEPTH && !required.has(name)) continue;
    model[name] = arbitraryFor(prop, depth + 1);
  }
  // `not: {required: [a, b]}` (mutually exclusive members): keep at most one of them.
  const exclusive = schema.not?.required;
  const record = fc
    .record(model, { requiredKeys: Object.keys(model).filter((k) => required.has(k)) })
    .map((value) => {
      if (!exclusive || !exclusive.every((name) => name in value)) return value;
      const copy: Record<string, unknown> = { ...value };
      for (const name of exclusive.slice(1)) delete copy[name];
      return copy;
    });
  const extra = schema.additionalProperties;
  if (extra && typeof extra === 'object' && depth < MAX_DEPTH) {
    const keys = schema.propertyNames ? stringArbitrary({ maxLength: 40, ...schema.propertyNames }) : fc.string({ minLength: 1, maxLength: 20 });
    const maxKeys = Math.min(schema.maxProperties ?? MAX_MAP_KEYS, MAX_MAP_KEYS);
    const map = fc.dictionary(keys, arbitraryFor(extra, depth + 1), { maxKeys, minKeys: Math.min(schema.minProperties ?? 0, maxKeys) });
    return fc.tuple(record, map).map(([fixed, dynamic]) => ({ ...dynamic, ...fixed }));
  }
  return record as Arbitrary<Record<string, unknown>>;
}

/** An arbitrary of values valid against `schema` (modulo `not` and `if/then/else`). */
export function arbitraryFor(schema: Schema | boolean | undefined, depth = 0): Arbitrary<unknown> {
  if (schema === undefined || schema === true) return fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean());
  if (schema === false) return fc.constant(undefined);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.allOf) {
    const { allOf, ...rest } = schema;
    return arbitraryFor(allOf.reduce(merge, rest), depth);
  }
  const branches = schema.oneOf ?? schema.anyOf;
  if (branches) {
    const { oneOf, anyOf: _anyOf, ...rest } = schema;
    return fc.oneof(
      ...branches.map((branch) => {
        const merged = merge(rest, branch);
        if (oneOf) {
          // Leave out what only the other branches require, so the sample matches exactly one.
          const own = new Set(branch.required ?? []);
          const others = oneOf.filter((b) => b !== branch).flatMap((b) => b.required ?? []);
          merged['x-fuzz-exclude'] = others.filter((name) => !own.has(name));
        }
        return arbitraryFor(merged, depth);
      }),
    );
  }
  const types = typesOf(schema);
  if (types.length === 0) return arbitraryFor(true, depth);
  return fc.oneof(
    ...types.map((type): Arbitrary<unknown> => {
      switch (type) {
        case 'object':
          return objectArbitrary(schema, depth);
        case 'array': {
          const items = arbitraryFor(schema.items, depth + 1);
          const constraints = { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? MAX_ARRAY, Math.max(MAX_ARRAY, schema.minItems ?? 0)) };
          return schema.uniqueItems ? fc.uniqueArray(items, { ...constraints, selector: (v) => JSON.stringify(v) }) : fc.array(items, constraints);
        }
        case 'string':
          return stringArbitrary(schema);
        case 'integer':
          return integerArbitrary(schema);
        case 'number':
          return numberArbitrary(schema);
        case 'boolean':
          return fc.boolean();
        case 'null':
          return fc.constant(null);
        default:
          throw new Error(`schema-arbitrary: unsupported type ${type}`);
      }
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Violations

/** Strings that break naive handling: NUL, lone surrogates, RTL override, emoji, huge. */
export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff-lone',
  '\u202e\u0645\u0631\u062d\u0628\u0627',
  '👩‍👩‍👧‍👦🏳️‍🌈',
  'e\u0301\u0301\u0301',
  '\ufeff\u200b\u2028\u2029',
  '\uffff\ufffe',
  "'; DROP TABLE orders; --",
  '%00%2e%2e%2f',
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  'é'.repeat(300),
  'x'.repeat(5_000),
];

export const HUGE_NUMBERS = [1e308, -1e308, 2 ** 53 + 1, -(2 ** 53) - 1, 1.5, -0.000001, 5e-324, 2 ** 31, -(2 ** 31) - 1, 1e21];

const otherTypeValues: unknown[] = [null, true, 0, -1, 'text', [], {}, [null], { nested: { deeper: [1, 'a'] } }];

/** Every path (list of keys) to a value inside `value`, the root included. */
export function pathsOf(value: unknown, prefix: Array<string | number> = [], out: Array<Array<string | number>> = []): Array<Array<string | number>> {
  out.push(prefix);
  if (Array.isArray(value)) value.forEach((item, i) => pathsOf(item, [...prefix, i], out));
  else if (value && typeof value === 'object') for (const [key, item] of Object.entries(value)) pathsOf(item, [...prefix, key], out);
  return out;
}

function getAt(value: unknown, path: Array<string | number>): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string | number, unknown> | undefined)?.[key], value);
}

/** A copy of `value` with the node at `path` replaced (or, for the root, the replacement itself). */
export function setAt(value: unknown, path: Array<string | number>, replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = replacement;
  return copy;
}

export type BodyViolation =
  | { kind: 'wrong-type'; at: number; value: unknown }
  | { kind: 'unknown-field'; at: number; name: string }
  | { kind: 'hostile-string'; at: number; value: string }
  | { kind: 'oversized-string'; at: number; length: number }
  | { kind: 'huge-number'; at: number; value: number }
  | { kind: 'null'; at: number }
  | { kind: 'drop-field'; at: number }
  | { kind: 'raw'; text: string };

export const bodyViolation: Arbitrary<BodyViolation> = fc.oneof(
  fc.record({ kind: fc.constant('wrong-type' as const), at: fc.nat(), value: fc.constantFrom(...otherTypeValues) }),
  fc.record({ kind: fc.constant('unknown-field' as const), at: fc.nat(), name: fc.constantFrom('zz_unknown', '__proto__', 'constructor', 'Amount', ' amount', '𝒂𝒎𝒐𝒖𝒏𝒕') }),
  fc.record({ kind: fc.constant('hostile-string' as const), at: fc.nat(), value: fc.oneof(fc.constantFrom(...HOSTILE_STRINGS), fc.string({ unit: 'binary', minLength: 1, maxLength: 30 })) }),
  fc.record({ kind: fc.constant('oversized-string' as const), at: fc.nat(), length: fc.constantFrom(256, 1_025, 70_000) }),
  fc.record({ kind: fc.constant('huge-number' as const), at: fc.nat(), value: fc.constantFrom(...HUGE_NUMBERS) }),
  fc.record({ kind: fc.constant('null' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('drop-field' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('raw' as const),
    text: fc.constantFrom(
      '{"a":',
      '[]',
      '"just a string"',
      '42',
      'null',
      'true',
      '{"a":1,"a":2}',
      '{"n":1e999}',
      '{"s":"\\ud800"}',
      '{"s":"\\u0000"}',
      `${'['.repeat(5_000)}${']'.repeat(5_000)}`,
      `{${Array.from({ length: 3_000 }, (_, i) => `"k${i}":${i}`).join(',')}}`,
    ),
  }),
);

/**
 * Applies a violation to a valid body. Returns the JSON text to send (raw violations are sent
 * as they are, which also covers malformed JSON).
 */
export function applyBodyViolation(body: unknown, violation: BodyViolation): string {
  if (violation.kind === 'raw') return violation.text;
  const base = body === undefined ? {} : body;
  const all = pathsOf(base);
  const pick = <T>(items: T[]): T | undefined => (items.length === 0 ? undefined : items[violation.at % items.length]);
  let result: unknown = base;
  switch (violation.kind) {
    case 'wrong-type': {
      const path = pick(all)!;
      const current = getAt(base, path);
      const replacement = typeof violation.value === typeof current && Array.isArray(violation.value) === Array.isArray(current) ? 'wrong-type' : violation.value;
      result = setAt(base, path, replacement);
      break;
    }
    case 'unknown-field': {
      const objects = all.filter((p) => {
        const node = getAt(base, p);
        return node !== null && typeof node === 'object' && !Array.isArray(node);
      });
      const path = pick(objects) ?? [];
      const node = { ...(getAt(base, path) as Record<string, unknown> | undefined) };
      // Defined as an own property: `__proto__` must travel as a key, not set a prototype.
      Object.defineProperty(node, violation.name, { value: 1, enumerable: true, configurable: true, writable: true });
      result = setAt(base, path, node);
      break;
    }
    case 'hostile-string':
    case 'oversized-string': {
      const strings = all.filter((p) => typeof getAt(base, p) === 'string');
      const value = violation.kind === 'hostile-string' ? violation.value : 'A'.repeat(violation.length);
      const path = pick(strings) ?? pick(all.filter((p) => p.length > 0)) ?? [];
      result = setAt(base, path, value);
      break;
    }
    case 'huge-number': {
      const numbers = all.filter((p) => typeof getAt(base, p) === 'number');
      result = setAt(base, pick(numbers) ?? pick(all.filter((p) => p.length > 0)) ?? [], violation.value);
      break;
    }
    case 'null':
      result = setAt(base, pick(all)!, null);
      break;
    case 'drop-field': {
      const members = all.filter((p) => p.length > 0 && typeof p[p.length - 1] === 'string');
      const path = pick(members);
      if (path) {
        const parent = { ...(getAt(base, path.slice(0, -1)) as Record<string, unknown>) };
        delete parent[path[path.length - 1] as string];
        result = setAt(base, path.slice(0, -1), parent);
      }
      break;
    }
  }
  return JSON.stringify(result);
}

export type QueryViolation =
  | { kind: 'unknown-param' }
  | { kind: 'bad-value'; at: number; value: string }
  | { kind: 'repeated'; at: number };

export const queryViolation: Arbitrary<QueryViolation> = fc.oneof(
  fc.constant({ kind: 'unknown-param' as const }),
  fc.record({
    kind: fc.constant('bad-value' as const),
    at: fc.nat(),
    value: fc.oneof(
      fc.constantFrom('', 'abc', '-1', '0', '1.5', '1e999', '99999999999999999999999', 'NaN', 'null', 'true', '[]', '{}', 'x'.repeat(600), '\u0000', '\ud800', '💥'),
      fc.string({ unit: 'binary', maxLength: 20 }),
    ),
  }),
  fc.record({ kind: fc.constant('repeated' as const), at: fc.nat() }),
);

export const pathViolation: Arbitrary<string> = fc.oneof(
  fc.constantFrom('x'.repeat(65), '%00', '..', '%2e%2e', '%2F', '%F0%9F%92%A5', '%ED%A0%80', '%20', '%25', '%', '%zz', 'ORD_%27%20OR%201%3D1'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 30 }).map(encodeURIComponentSafe),
);

/** encodeURIComponent that survives lone surrogates (it throws on them): percent-encode code units. */
export function encodeURIComponentSafe(value: string): string {
  // RFC 3986 leaves !'()* reserved; OpenAPI query values without allowReserved must encode them.
  const strict = (text: string) => encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  try {
    return strict(value);
  } catch {
    return [...value].map((c) => (c.length === 1 && c.charCodeAt(0) >= 0xd800 && c.charCodeAt(0) <= 0xdfff ? '%EF%BF%BD' : strict(c))).join('');
  }
}
