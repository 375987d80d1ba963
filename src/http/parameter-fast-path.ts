/**
 * Requests that express-openapi-validator would pass unchanged, recognised without running it.
 *
 * The validator costs a read more than anything else the read does besides the database round
 * trip and the answer (docs/benchmarks.md): five promise hops, a walk over every route, a
 * parameter mutator and an ajv run per request. For an operation whose parameters are all plain
 * strings (type, length, pattern, enum), in the path or the query, and that is a GET, what
 * it checks is simple enough to check here, the same way (ajv's rules: code-point lengths,
 * `u`-flag patterns). A request this check accepts goes past the validator; every other request
 * (a failed check, a parameter it does not cover, a body, HEAD) goes through it as before, so
 * every refusal keeps the validator's words. What the validator leaves on an accepted request is
 * left here too: the query as the request's own property, absent parameters' defaults filled in
 * (its `req.params` the router resets before the handler runs).
 */
import type { Request } from 'express';
import type { OpenApiDocument, OperationInfo } from './spec.js';

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Record<string, unknown>;
  [key: string]: unknown;
}

/** A plain string parameter's rule, or undefined when the schema says more than these keywords. */
type StringRule = (value: unknown) => boolean;

const PLAIN_SCHEMA_KEYS = new Set(['type', 'minLength', 'maxLength', 'pattern', 'enum', 'description', 'example', 'examples', 'title']);
const PLAIN_PARAMETER_KEYS = new Set(['name', 'in', 'required', 'schema', 'description', 'example', 'examples', 'deprecated']);

/** ajv's length: code points, a surrogate pair counting once. */
function codePointLength(text: string): number {
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    length++;
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
  }
  return length;
}

function stringRule(parameter: Parameter): StringRule | undefined {
  const schema = parameter.schema;
  if (!schema || schema.type !== 'string') return undefined;
  if (!Object.keys(parameter).every((key) => PLAIN_PARAMETER_KEYS.has(key))) return undefined;
  if (!Object.keys(schema).every((key) => PLAIN_SCHEMA_KEYS.has(key))) return undefined;
  const { minLength, maxLength, pattern, enum: allowed } = schema as { minLength?: unknown; maxLength?: unknown; pattern?: unknown; enum?: unknown };
  if (minLength !== undefined && typeof minLength !== 'number') return undefined;
  if (maxLength !== undefined && typeof maxLength !== 'number') return undefined;
  if (pattern !== undefined && typeof pattern !== 'string') return undefined;
  if (allowed !== undefined && !(Array.isArray(allowed) && allowed.every((v) => typeof v === 'string'))) return undefined;
  // ajv compiles patterns with the u flag (its unicodeRegExp default).
  const regexp = pattern === undefined ? undefined : new RegExp(pattern, 'u');
  return (value) => {
    if (typeof value !== 'string') return false;
    if (minLength !== undefined || maxLength !== undefined) {
      const length = codePointLength(value);
      if (minLength !== undefined && length < minLength) return false;
      if (maxLength !== undefined && length > maxLength) return false;
    }
    if (regexp && !regexp.test(value)) return false;
    return allowed === undefined || (allowed as string[]).includes(value);
  };
}

/** A local `#/…` reference resolved in the document; undefined for anything else. */
function resolve(document: OpenApiDocument, value: unknown): Parameter | undefined {
  const ref = (value as { $ref?: unknown } | undefined)?.$ref;
  if (ref === undefined) return value as Parameter;
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return undefined;
  let node: unknown = document;
  for (const part of ref.slice(2).split('/')) node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return node === undefined ? undefined : resolve(document, node);
}

/** Could one URL match both templates (same segment count, each segment equal or a parameter)? */
function overlap(a: string, b: string): boolean {
  const left = a.toLowerCase().split('/');
  const right = b.toLowerCase().split('/');
  return left.length === right.length && left.every((segment, i) => segment === right[i] || segment.includes('{') || right[i]!.includes('{'));
}

export type FastPathCheck = (req: Request, pathParams: Record<string, string>) => boolean;

/**
 * The check for one GET operation, or undefined when it has a body, a header or cookie parameter, a
 * path parameter that is not a plain string, or a path another documented path could also match
 * (the validator finds its route on its own, in its own order).
 */
export function parameterFastPath(document: OpenApiDocument, op: OperationInfo): FastPathCheck | undefined {
  // Reads only: a POST without a body still comes with a length and a content type to judge.
  if (op.method !== 'get' || op.operation.requestBody !== undefined) return undefined;
  if (Object.keys(document.paths).some((other) => other !== op.path && overlap(other, op.path))) return undefined;
  const item = document.paths[op.path] as { parameters?: unknown[] };
  const byKey = new Map<string, Parameter>();
  for (const raw of [...(item.parameters ?? []), ...((op.operation.parameters as unknown[] | undefined) ?? [])]) {
    const parameter = resolve(document, raw);
    if (!parameter || typeof parameter.name !== 'string') return undefined;
    byKey.set(`${parameter.in}:${parameter.name}`, parameter);
  }
  const pathRules: Array<[string, StringRule]> = [];
  const queryRules = new Map<string, StringRule | undefined>();
  const defaults: Array<[string, unknown]> = [];
  const required: string[] = [];
  for (const parameter of byKey.values()) {
    const rule = stringRule(parameter);
    if (parameter.in === 'path') {
      if (!rule) return undefined;
      pathRules.push([parameter.name, rule]);
    } else if (parameter.in === 'query') {
      queryRules.set(parameter.name, rule);
      if (parameter.required) required.push(parameter.name);
      const fallback = parameter.schema?.default;
      if (fallback !== undefined) defaults.push([parameter.name, fallback]);
    } else return undefined;
  }
  const method = op.method.toUpperCase();
  return (req, pathParams) => {
    if (req.method !== method) return false;
    if (req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined) return false;
    for (const [name, rule] of pathRules) if (!rule(pathParams[name])) return false;
    const query = req.query as Record<string, unknown>;
    for (const name in query) {
      // A parameter the rules do not cover (integers, formats, arrays) or do not know: the validator decides.
      const rule = queryRules.get(name);
      // An empty value is refused by the validator ('Empty value found') whatever the schema allows.
      if (!rule || query[name] === '' || !rule(query[name])) return false;
    }
    for (const name of required) if (query[name] === undefined) return false;
    for (const [name, value] of defaults) if (query[name] === undefined) query[name] = structuredClone(value);
    // As the validator leaves it (its Express 5 workaround): the parsed query as the request's own property.
    Object.defineProperty(req, 'query', { writable: true, value: query });
    return true;
  };
}
