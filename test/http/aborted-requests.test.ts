/**
 * A client that hangs up while its request is being authenticated: body-parser then skips the
 * body, and without a guard the handler would run with no body at all (the validator lets an
 * absent body through). Seen under load (bench:checkout) as 500 "unhandled error" lines.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createMerchantApp } from '../../src/apps.js';
import type { OrgService } from '../../src/orgs/orgs.service.js';

const lines: string[] = [];
let ctx: TestContext;
let server: Server;
/** Resolved when the server side of the connection has closed: the key lookup waits for it. */
let clientGone: () => void = () => {};
let gate: Promise<void> = Promise.resolve();
let authenticated: () => void = () => {};

beforeAll(async () => {
  ctx = await createTestContext({ env: { LOG_LEVEL: 'info' }, logDestination: { write: (line) => void lines.push(line) } });
  const orgs: OrgService = Object.create(ctx.services.orgs);
  orgs.authenticateApiKey = async (...args) => {
    await gate;
    try {
      return await ctx.services.orgs.authenticateApiKey(...args);
    } finally {
      authenticated();
    }
  };
  const app = await createMerchantApp({ ...ctx.deps, services: { ...ctx.services, orgs } });
  server = app.listen(0, '127.0.0.1');
  server.on('connection', (socket) => socket.once('close', () => clientGone()));
  await new Promise((resolve) => server.once('listening', resolve));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await ctx?.close();
});

describe('a request whose client hung up before its body was read', () => {
  it('is logged as aborted (499) and never reaches the handler without its body', async () => {
    gate = new Promise((resolve) => (clientGone = resolve));
    const { port } = server.address() as AddressInfo;
    const body = JSON.stringify({ pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Gone' } } });
    const before = Number((await ctx.testDb.database.db('checkout_sessions').count({ n: '*' }).first())!.n);
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /v1/checkout-sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-Key: ${ctx.orgA.apiKey}\r\nIdempotency-Key: gone-1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const lookedUp = new Promise<void>((resolve) => (authenticated = resolve));
    // The request is in and its key lookup waits; now the client vanishes (a reset, as a killed
    // load generator does), and only then does the lookup go on.
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.resetAndDestroy();
    await lookedUp;
    // The 499 line is written once the request is given up (a loaded machine takes its time); then
    // whatever the handler would do (a few queries, then a crash on the missing body) has time to happen.
    const routeLines = () => lines.filter((l) => l.includes('"route":"/v1/checkout-sessions"')).map((l) => JSON.parse(l));
    await expect.poll(() => routeLines().length).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const logged = routeLines();
    expect(logged).toEqual([expect.objectContaining({ status: 499, msg: 'request aborted by the client' })]);
    expect(lines.join('')).not.toContain('unhandled error');
    expect(Number((await ctx.testDb.database.db('checkout_sessions').count({ n: '*' }).first())!.n)).toBe(before);
  });
});
