/** Secrets never reach a log line, whatever the request carries. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createLogger } from '../../src/kernel/logger.js';

const lines: string[] = [];
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ env: { LOG_LEVEL: 'debug' }, logDestination: { write: (line) => void lines.push(line) } });
});
afterAll(async () => {
  await ctx?.close();
});

describe('logging', () => {
  it('logs each request with its id, and never the API key or admin token', async () => {
    await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    await ctx.merchant.get('/v1/me').set('X-API-Key', `${ctx.orgA.apiKey}x`);
    await ctx.admin.get('/v1/orgs');
    const all = lines.join('');
    expect(all).toContain('"route":"/v1/me"');
    expect(all).toContain('"status":401');
    expect(all).not.toContain(ctx.orgA.apiKey);
    expect(all).not.toContain(ctx.adminToken);
  });

  it('logs the webhook listen poll (x-access-log: debug) at debug level when it succeeds, at info when refused', async () => {
    lines.length = 0;
    expect((await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/webhook-events`)).status).toBe(200);
    expect((await ctx.admin.get('/v1/orgs/ORG_000000000000000000000000/webhook-events')).status).toBe(404);
    await ctx.admin.get('/v1/orgs');
    const requests = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'request');
    const levelOf = (route: string, status: number) => requests.find((r) => r.route === route && r.status === status)?.level;
    // pino's numeric levels: 20 debug, 30 info.
    expect(levelOf('/v1/orgs/{id}/webhook-events', 200)).toBe(20);
    expect(levelOf('/v1/orgs/{id}/webhook-events', 404)).toBe(30);
    expect(levelOf('/v1/orgs', 200)).toBe(30);
  });

  it('redacts credential headers even when a whole request is logged by mistake', () => {
    const captured: string[] = [];
    const logger = createLogger({ level: 'info', destination: { write: (l) => void captured.push(l) } });
    logger.info({ req: { headers: { 'x-api-key': 'ak_secret', authorization: 'Bearer t0ken' } }, apiKey: { key: 'ak_other' } }, 'oops');
    const line = captured.join('');
    expect(line).not.toContain('ak_secret');
    expect(line).not.toContain('t0ken');
    expect(line).not.toContain('ak_other');
    expect(line).toContain('[redacted]');
  });
});
