/** Every operation of every document is served by exactly one listener (no 404 "Route not found"). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type supertest from 'supertest';
import { listOperations, loadDocument, type DocumentName, type OperationInfo } from '../../src/http/spec.js';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

function agentFor(doc: DocumentName, op: OperationInfo): supertest.Agent {
  if (doc === 'admin') return ctx.admin;
  if (doc === 'merchant' && op.operationId !== 'getWebhookSigningKey') return ctx.merchant;
  return ctx.platform;
}

describe.each<DocumentName>(['merchant', 'telemetry', 'agent-wallet', 'admin'])('%s operations', (name) => {
  it('are all routed', async () => {
    const doc = await loadDocument(name);
    for (const op of listOperations(doc)) {
      const url = op.path.replace(/\{[^}]+\}/g, 'X0000000000000000000000000000000');
      const res = await agentFor(name, op)[op.method](url);
      expect([404, 405].includes(res.status) && /Route not found|Method not allowed/.test(JSON.stringify(res.body)), `${op.operationId} ${op.method.toUpperCase()} ${op.path}`).toBe(false);
    }
  });
});
