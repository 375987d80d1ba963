/**
 * JSON Schema's maxLength counts characters; the contract limits some strings in UTF-8 bytes
 * (`x-max-bytes`). This is the one helper that enforces those, walking the request body along
 * the operation's (dereferenced) request schema.
 */
import type { Request } from 'express';
import { validationError } from '../kernel/errors.js';
import type { OperationInfo } from './spec.js';

type Schema = {
  'x-max-bytes'?: number;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
};

function walk(schema: Schema | undefined, value: unknown, path: string): void {
  if (!schema || value === null || value === undefined) return;
  const maxBytes = schema['x-max-bytes'];
  if (typeof maxBytes === 'number' && typeof value === 'string' && Buffer.byteLength(value, 'utf8') > maxBytes) {
    throw validationError(`${path} must be at most ${maxBytes} bytes in UTF-8`, { field: path });
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => walk(schema.items, item, `${path}[${index}]`));
    return;
  }
  if (typeof value === 'object') {
    for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
      const childSchema =
        schema.properties?.[key] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
      walk(childSchema, child, `${path}.${key}`);
    }
  }
}

/** Whether a (dereferenced, possibly cyclic) schema declares `x-max-bytes` anywhere. */
function declaresMaxBytes(schema: unknown, seen = new Set<unknown>()): boolean {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return false;
  seen.add(schema);
  if ('x-max-bytes' in (schema as object)) return true;
  return Object.values(schema as object).some((child) => declaresMaxBytes(child, seen));
}

// Most bodies have no byte limit anywhere: skip walking them (an ingest batch has 10^5 values).
const hasLimits = new WeakMap<object, boolean>();

export function checkByteLimits(op: OperationInfo, req: Request): void {
  const requestBody = op.operation.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined;
  const schema = requestBody?.content?.['application/json']?.schema;
  if (!schema || req.body === undefined) return;
  let limited = hasLimits.get(schema);
  if (limited === undefined) hasLimits.set(schema, (limited = declaresMaxBytes(schema)));
  if (limited) walk(schema, req.body, 'body');
}
