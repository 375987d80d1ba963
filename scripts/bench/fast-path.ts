/**
 * `npx tsx scripts/bench/fast-path.ts`: what the parameter fast path (src/http/parameter-fast-path.ts)
 * saves per read, with nothing else in the way: two apps built from the merchant document with
 * handlers that answer a constant, one with the fast path and one without, driven over keep-alive
 * HTTP from this same process (the client's work is the same for both, so the difference is the
 * server's). Five rounds alternating the two; prints the medians of CPU per request.
 */
import { createServer, Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenApiApp } from '../../src/http/openapi-app.js';
import { composeDocument, listOperations, loadDocument } from '../../src/http/spec.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';

const doc = composeDocument('merchant', [{ doc: await loadDocument('merchant'), include: () => true }]);
const body = { success: true, message: 'OK', data: { id: 'x' } };
const handlers = Object.fromEntries(listOperations(doc).map((op) => [op.operationId, async () => ({ status: 200, body })]));
const schemes = Object.keys(doc.components?.securitySchemes ?? {});
async function serve(fast: boolean) {
  const app = createOpenApiApp({ name: 'ab', document: doc, handlers, authenticators: Object.fromEntries(schemes.map((s) => [s, async () => undefined])),
    logger: createLogger({ level: 'silent' }), clock: new ManualClock(new Date()), validateResponses: false, bodyLimit: () => 65536, errorFlavor: () => 'envelope', readiness: async () => {}, parameterFastPath: fast });
  const server = createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
}
const servers = { fast: await serve(true), slow: await serve(false) };
const agent = new Agent({ keepAlive: true, maxSockets: 8 });
const get = (port: number, path: string) => new Promise<void>((resolve, reject) => {
  request({ host: '127.0.0.1', port, path, agent }, (res) => { res.resume(); res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(String(res.statusCode))))); }).on('error', reject).end();
});
const PATHS: Record<string, string> = { get: '/v1/checkout-sessions/CS_abcdef', order: '/v1/orders/ORD_abcdef', orders: '/v1/orders', entitlement: '/v1/entitlements/check?customer_id=CUS_abc&product_id=PRD_abc' };
async function run(kind: 'fast' | 'slow', path: string, n: number) {
  const port = (servers[kind].address() as AddressInfo).port;
  const cpu = process.cpuUsage();
  let i = 0;
  await Promise.all(Array.from({ length: 8 }, async () => { while (i++ < n) await get(port, path); }));
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / 1000 / n;
}
for (const [name, path] of Object.entries(PATHS)) { await run('fast', path, 2000); await run('slow', path, 2000); }
const results: Record<string, { fast: number[]; slow: number[] }> = {};
for (let round = 0; round < 5; round++) {
  for (const [name, path] of Object.entries(PATHS)) {
    results[name] ??= { fast: [], slow: [] };
    results[name].slow.push(await run('slow', path, 3000));
    results[name].fast.push(await run('fast', path, 3000));
  }
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
for (const [name, r] of Object.entries(results)) console.log(name, 'validator', med(r.slow).toFixed(3), 'fast path', med(r.fast).toFixed(3), 'ms CPU per request (server + client, one process); saved', ((med(r.slow) - med(r.fast)) * 1000).toFixed(0), 'µs');
process.exit(0);
