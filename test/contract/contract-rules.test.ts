/**
 * Rules of the contract that Redocly's lint cannot walk: every request object closed at every
 * depth, operationIds unique camelCase, every operation of every document routed.
 */
import { describe, expect, it } from 'vitest';
import { listOperations, loadDocument, type DocumentName } from '../../src/http/spec.js';

const DOCUMENTS: DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin', 'console'];

type Schema = Record<string, unknown>;

/** Objects that are maps by design declare a schema for their values instead of `false`. */
function openObjects(schema: unknown, path: string, seen = new Set<unknown>()): string[] {
  if (!schema || typeof schema !== 'object' || seen.has(schema)) return [];
  seen.add(schema);
  const s = schema as Schema;
  const problems: string[] = [];
  const types = Array.isArray(s.type) ? s.type : [s.type];
  const isObject = types.includes('object') || s.properties !== undefined;
  // A free-form object (the EIP-712 message, whose shape `types` defines) must say so in its description.
  const explainedFreeForm = /free-form|shape is defined by|defined by `types`/i.test(String(s.description ?? ''));
  if (isObject && !explainedFreeForm) {
    if (s.additionalProperties === undefined && s.unevaluatedProperties === undefined) problems.push(path);
    if (s.additionalProperties === true) problems.push(`${path} (additionalProperties: true)`);
  }
  for (const [key, value] of Object.entries(s)) {
    if (key === 'properties' && value && typeof value === 'object') {
      for (const [name, child] of Object.entries(value)) problems.push(...openObjects(child, `${path}.${name}`, seen));
    } else if (['items', 'additionalProperties', 'not'].includes(key)) {
      problems.push(...openObjects(value, `${path}.${key}`, seen));
    } else if (['oneOf', 'anyOf', 'allOf'].includes(key) && Array.isArray(value)) {
      value.forEach((branch, i) => {
        // Branches that only state `required` (mutual exclusion) inherit the parent's properties.
        const b = branch as Schema;
        if (Object.keys(b).every((k) => k === 'required' || k === 'description')) return;
        problems.push(...openObjects(branch, `${path}.${key}[${i}]`, seen));
      });
    }
  }
  return problems;
}

describe.each(DOCUMENTS)('%s document', (name) => {
  it('closes every request object at every depth', async () => {
    const doc = await loadDocument(name);
    const problems: string[] = [];
    for (const op of listOperations(doc)) {
      const body = (op.operation.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined)?.content;
      for (const [type, media] of Object.entries(body ?? {})) {
        problems.push(...openObjects(media.schema, `${op.operationId} ${type}`));
      }
    }
    expect(problems).toEqual([]);
  });

  it('has unique camelCase operationIds with a summary, a description and a 4xx response', async () => {
    const doc = await loadDocument(name);
    const ops = listOperations(doc);
    expect(ops.length).toBeGreaterThan(0);
    const ids = ops.map((o) => o.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const op of ops) {
      expect(op.operationId).toMatch(/^[a-z][a-zA-Z0-9]*$/);
      expect(op.operation.summary, op.operationId).toBeTruthy();
      expect(op.operation.description, op.operationId).toBeTruthy();
      const statuses = Object.keys(op.operation.responses as object);
      expect(statuses.some((s) => s.startsWith('4')), op.operationId).toBe(true);
    }
  });
});
