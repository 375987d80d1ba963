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
