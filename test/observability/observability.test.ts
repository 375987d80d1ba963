/**
 * Observability and protection, in-process: `GET /metrics` (where it is served and what it
 * says), the per-key merchant rate limit, and the security headers of the listeners and the
 * hosted pages.
 */
import type { Express } from 'express';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createAdminApp, createMerchantApp, createPlatformApp } from '../../src/apps.js';
import { Metrics } from '../../src/observability/metrics.js';
import { KnexMetricsRepository } from '../../src/observability/metrics.repository.js';
import { createWorkerStatusApp } from '../../src/observability/http.js';
import { FixedWindowRateLimiter } from '../../src/http/rate-limit.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import { createLogger } from '../../src/kernel/logger.js';
import { HOSTED_PAGE_CSP } from '../../src/pages/page.js';
import { BENCH_FLOOR_TABLE_SQL, BENCH_READ_TABLE_SQL, BenchFloorRepository, registerBenchFloor } from '../../tools/bench-floor.js';
import { bearer, createProjectWithKey, span, spanId, traceId } from '../telemetry/helpers.js';

let ctx: TestContext;
let metrics: Metrics;
let merchant: supertest.Agent;
let platform: supertest.Agent;
let admin: supertest.Agent;
let merchantHttp: Express;

/** The value of one series of the exposition text (labels in any order), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const match = /^([^{ ]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}

const scrape = async () => {
  const res = await admin.get('/metrics');
  expect(res.status).toBe(200);
  return res.text;
};

const sessionBody = { pricingData: { amount: 1500, currency: 'USD', productData: { name: 'Metrics test' } }, customerEmail: 'buyer@example.com' };

beforeAll(async () => {
  ctx = await createTestContext({
    env: { WEBHOOK_ALLOW_LOOPBACK: 'true', MERCHANT_RATE_LIMIT_PER_MINUTE: '40', PUBLIC_BASE_URL: 'https://pay.example.com' },
  });
  metrics = new Metrics({ repo: new KnexMetricsRepository(ctx.testDb.database.db), clock: ctx.clock, role: 'all', defaultMetrics: false });
  const deps = { ...ctx.deps, metrics };
  merchantHttp = await createMerchantApp(deps);
  merchant = supertest.agent(merchantHttp);
  platform = supertest.agent(await createPlatformApp(deps));
  admin = supertest.agent(await createAdminApp(deps)).set('Authorization', `Bearer ${ctx.adminToken}`);
});
afterAll(async () => {
  await ctx?.close();
});

describe('GET /metrics', () => {
  it('is served on the admin listener only, in the Prometheus text format, without authentication', async () => {
    const res = await supertest(await createAdminApp({ ...ctx.deps, metrics })).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.text).toContain('# TYPE kassa_http_request_duration_seconds histogram');
    expect((await merchant.get('/metrics')).status).toBe(404);
    expect((await platform.get('/metrics')).status).toBe(404);
  });

  it('times requests by listener, operationId, method and status', async () => {
    const labels = { app: 'merchant', operation: 'createCheckoutSession', method: 'POST', status: '201' };
    const before = sample(await scrape(), 'kassa_http_request_duration_seconds_count', labels) ?? 0;
    for (const key of ['m-1', 'm-2', 'm-3']) {
      const res = await merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', key).send(sessionBody);
      expect(res.status).toBe(201);
    }
    await merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'm-4').send({ ...sessionBody, quantity: 0 });
    await merchant.get('/v1/me').set('X-API-Key', 'ak_wrong');
    const text = await scrape();
    expect(sample(text, 'kassa_http_request_duration_seconds_count', labels)).toBe(before + 3);
    expect(sample(text, 'kassa_http_request_duration_seconds_count', { ...labels, status: '400' })).toBe(1);
    expect(sample(text, 'kassa_http_request_duration_seconds_count', { app: 'merchant', operation: 'getMe', status: '401' })).toBe(1);
    // Buckets are cumulative and end with +Inf = count.
    expect(sample(text, 'kassa_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(before + 3);
    expect(sample(text, 'kassa_http_request_duration_seconds_sum', labels)).toBeGreaterThan(0);
    // The admin scrape itself is timed too, under its route.
    expect(sample(text, 'kassa_http_request_duration_seconds_count', { app: 'admin', operation: '/metrics' })).toBeGreaterThanOrEqual(1);
  });

  it('labels routes outside the contract by their pattern, never by the raw path', async () => {
    const created = await merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'page-1').send(sessionBody);
    const token = new URL(created.body.data.url).pathname.split('/').pop()!;
    expect((await merchant.get(`/checkout/${token}`)).status).toBe(200);
    const unmatched = sample(await scrape(), 'kassa_http_request_duration_seconds_count', { app: 'merchant', operation: 'unmatched', status: '404' }) ?? 0;
    expect((await merchant.get('/v1/no-such-route/abc')).status).toBe(404);
    const text = await scrape();
    expect(sample(text, 'kassa_http_request_duration_seconds_count', { app: 'merchant', operation: '/checkout/:token', status: '200' })).toBe(1);
    expect(sample(text, 'kassa_http_request_duration_seconds_count', { app: 'merchant', operation: 'unmatched', status: '404' })).toBe(unmatched + 1);
    expect(text).not.toContain(token);
  });

  it('reports the webhook outbox from PostgreSQL and the attempts this process made', async () => {
    const endpoint = await merchant.post('/v1/webhook').set('X-API-Key', ctx.orgB.apiKey).send({ name: 'Nowhere', url: 'https://127.0.0.1:9/hook', events: ['order.paid'] });
    expect(endpoint.status).toBe(201);
    const created = await merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgB.apiKey).set('Idempotency-Key', 'pay-1').send(sessionBody);
    const pay = await merchant.post(`${new URL(created.body.data.url).pathname}/pay`).type('form').send({ cardNumber: '4242 4242 4242 4242', expiry: '12/34', cvc: '123' });
    expect(pay.status).toBe(303);
    ctx.clock.advance(30_000);
    let text = await scrape();
    expect(sample(text, 'kassa_database_up')).toBe(1);
    expect(sample(text, 'kassa_webhook_outbox_pending')).toBe(1);
    expect(sample(text, 'kassa_webhook_outbox_due')).toBe(1);
    expect(sample(text, 'kassa_webhook_outbox_leased')).toBe(0);
    expect(sample(text, 'kassa_webhook_outbox_oldest_due_seconds')).toBe(30);

    // Port 9 on loopback refuses the connection: a transport error, retried later.
    const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(ctx.testDb.database.db), ctx.services.signingKeys, new UrlGuard({ allowLoopback: true }), ctx.clock, createLogger({ level: 'silent' }), {
      onOutcome: (outcome) => metrics.webhookAttempt(outcome),
    });
    expect(await worker.runOnce()).toBe(1);
    text = await scrape();
    expect(sample(text, 'kassa_webhook_attempts_total', { outcome: 'retrying' })).toBe(1);
    expect(sample(text, 'kassa_webhook_attempts_total', { outcome: 'succeeded' })).toBe(0);
    expect(sample(text, 'kassa_webhook_outbox_pending')).toBe(1);
    expect(sample(text, 'kassa_webhook_outbox_due')).toBe(0);
    expect(sample(text, 'kassa_webhook_outbox_oldest_due_seconds')).toBe(0);
  });

  it('counts accepted telemetry (traces and spans), not refused batches', async () => {
    const key = await createProjectWithKey(ctx, ctx.orgA.orgId);
    const start = ctx.clock.now().getTime() - 60_000;
    const root = spanId();
    const body = { traces: [{ trace_id: traceId(), spans: [span({ span_id: root, parent_span_id: null, start, durationMs: 20 }), span({ parent_span_id: root, start: start + 1, durationMs: 5 })] }] };
    expect((await platform.post('/v1/ingest').set(bearer(key.key)).send(body)).status).toBe(202);
    expect((await platform.post('/v1/ingest').set(bearer(key.key)).send({ traces: [{ trace_id: 'nope', spans: [] }] })).status).toBe(400);
    const text = await scrape();
    expect(sample(text, 'kassa_telemetry_ingested_total', { kind: 'traces' })).toBe(1);
    expect(sample(text, 'kassa_telemetry_ingested_total', { kind: 'spans' })).toBe(2);

    // OTLP: a span rejected alone (partial success) is not counted.
    const nanos = (ms: number) => (BigInt(ms) * 1_000_000n).toString();
    const otlpSpan = (endMs: number) => ({ traceId: traceId(), spanId: spanId(), name: 'x', startTimeUnixNano: nanos(start), endTimeUnixNano: nanos(endMs) });
    const partial = await platform.post('/v1/otlp/v1/traces').set(bearer(key.key)).send({ resourceSpans: [{ scopeSpans: [{ spans: [otlpSpan(start + 5), otlpSpan(start - 5)] }] }] });
    expect(partial.body.partialSuccess.rejectedSpans).toBe('1');
    expect(sample(await scrape(), 'kassa_telemetry_ingested_total', { kind: 'spans' })).toBe(3);
  });

  it('shows chain watcher lag per chain, and answers without the database-derived series while PostgreSQL is down', async () => {
    const down = new Metrics({ repo: { snapshot: async () => Promise.reject(new Error('connect ECONNREFUSED')) }, clock: ctx.clock, role: 'worker', defaultMetrics: false });
    down.chainWatcherLag(8453, 4);
    const { body } = await down.render();
    expect(sample(body, 'kassa_database_up', { role: 'worker' })).toBe(0);
    expect(sample(body, 'kassa_chain_watcher_lag_blocks', { chain_id: '8453' })).toBe(4);
    expect(sample(body, 'kassa_webhook_outbox_pending')).toBeNaN();
    // prom-client writes "Nan"; Prometheus parses NaN case-insensitively.
    expect(body).toMatch(/^kassa_webhook_outbox_pending\{role="worker"\} nan$/im);
  });

  it('a worker process answers /metrics, /healthz and /readyz on its status listener, nothing else', async () => {
    const app = supertest(createWorkerStatusApp(metrics, async () => {}));
    expect((await app.get('/metrics')).text).toContain('kassa_webhook_attempts_total');
    expect((await app.get('/healthz')).status).toBe(200);
    expect((await app.get('/readyz')).status).toBe(200);
    expect((await app.get('/v1/orgs')).status).toBe(404);
    const failing = supertest(createWorkerStatusApp(metrics, async () => Promise.reject(new Error('down'))));
    const ready = await failing.get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.error.code).toBe('SERVICE_UNAVAILABLE');
  });
});

describe('the admin listener beyond loopback (issue 27, item 8)', () => {
  // Decision (docs/operations.md): /metrics asks for the admin token once the admin listener binds
  // beyond loopback (ADMIN_TLS_TERMINATED=true in production); /docs stays open everywhere (the
  // admin API's reference is the published openapi/admin.yaml, no data); /healthz and /readyz too.
  const exposed = () => ({ ...ctx.deps, metrics, config: { ...ctx.deps.config, adminHost: '0.0.0.0', adminTlsTerminated: true } });

  it('/metrics needs the admin token (401 without or with a wrong one), /docs, /healthz and /readyz do not', async () => {
    const app = supertest(await createAdminApp(exposed()));
    const anonymous = await app.get('/metrics');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('UNAUTHORIZED');
    expect(anonymous.text).not.toContain('kassa_http_request_duration_seconds');
    expect((await app.get('/metrics').set('Authorization', 'Bearer wrong-token-wrong-token-wrong')).status).toBe(401);
    const scraped = await app.get('/metrics').set('Authorization', `Bearer ${ctx.adminToken}`);
    expect(scraped.status).toBe(200);
    expect(scraped.text).toContain('# TYPE kassa_http_request_duration_seconds histogram');
    expect((await app.get('/docs')).status).toBe(200);
    expect((await app.get('/healthz')).status).toBe(200);
    expect((await app.get('/readyz')).status).toBe(200);
  });

  it("a worker's status listener beyond loopback asks for the token on /metrics too", async () => {
    const app = supertest(createWorkerStatusApp(metrics, async () => {}, { token: ctx.adminToken }));
    expect((await app.get('/metrics')).status).toBe(401);
    expect((await app.get('/metrics').set('Authorization', `Bearer ${ctx.adminToken}`)).text).toContain('kassa_webhook_attempts_total');
    expect((await app.get('/readyz')).status).toBe(200);
  });
});

describe('per-API-key rate limit on the merchant API', () => {
  it('answers 429 RATE_LIMITED with Retry-After once a key exceeds its window, and counts each key alone', async () => {
    // A fresh window, so earlier tests' requests do not count.
    ctx.clock.set('2026-11-22T10:00:00.000Z');
    const clock = ctx.clock as ManualClock;
    const limited = supertest(await createMerchantApp({ ...ctx.deps, metrics, config: { ...ctx.config, merchantRateLimitPerMinute: 3 } }));
    for (let i = 0; i < 3; i++) expect((await limited.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
    clock.advance(15_000);
    const refused = await limited.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('45');
    expect(refused.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
    expect(refused.body.message).toMatch(/at most 3 requests per 60 s/);
    // Another key of another organization has its own budget; a bad key is a 401, never counted.
    expect((await limited.get('/v1/me').set('X-API-Key', ctx.orgB.apiKey)).status).toBe(200);
    expect((await limited.get('/v1/me').set('X-API-Key', 'ak_wrong')).status).toBe(401);
    // Every operation counts against the same budget.
    expect((await limited.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'rl-1').send(sessionBody)).status).toBe(429);
    clock.advance(45_000);
    expect((await limited.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey)).status).toBe(200);
  });

  it('is off with a limit of 0, and Retry-After never says 0', () => {
    const clock = new ManualClock('2026-11-22T10:00:59.999Z');
    const off = new FixedWindowRateLimiter(0, 60_000, clock);
    for (let i = 0; i < 10_000; i++) off.hit('k');
    const tight = new FixedWindowRateLimiter(1, 60_000, clock);
    tight.hit('k');
    try {
      tight.hit('k');
      expect.unreachable();
    } catch (err) {
      expect((err as { options: { headers: Record<string, string> } }).options.headers['Retry-After']).toBe('1');
    }
  });
});

describe('security headers', () => {
  it('hosted pages: a CSP with no script source and no framing, nosniff, no-referrer, HSTS on an https base URL', async () => {
    const created = await merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', 'headers-1').send(sessionBody);
    const page = await merchant.get(new URL(created.body.data.url).pathname);
    expect(page.status).toBe(200);
    const csp = page.headers['content-security-policy'];
    expect(csp).toBe(HOSTED_PAGE_CSP);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toMatch(/script-src/);
    expect(page.text).not.toMatch(/<script|\son[a-z]+=/i);
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    expect(page.headers['referrer-policy']).toBe('no-referrer');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['strict-transport-security']).toBe('max-age=31536000');
  });

  it('API responses carry nosniff; HSTS only when the public URL is https', async () => {
    const me = await merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(me.headers['x-content-type-options']).toBe('nosniff');
    expect(me.headers['strict-transport-security']).toBe('max-age=31536000');
    const plain = supertest(await createMerchantApp({ ...ctx.deps, config: { ...ctx.config, publicBaseUrl: 'http://localhost:3000' } }));
    const res = await plain.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.headers['strict-transport-security']).toBeUndefined();
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    // PUBLIC_API_URL is http in this context.
    expect((await platform.get('/v1/webhooks/signing-key')).headers['strict-transport-security']).toBeUndefined();
  });
});

describe('the benchmark floor route', () => {
  it('is not part of the product; mounted by the benchmark harness, it writes one row in a transaction per request', async () => {
    expect((await merchant.post('/__bench/floor').send({})).status).toBe(404);
    await ctx.testDb.database.db.raw(BENCH_FLOOR_TABLE_SQL);
    const repo = new BenchFloorRepository(ctx.testDb.database.db);
    const floor = supertest(await createMerchantApp(ctx.deps, { extraRoutes: (router) => registerBenchFloor(router, repo, ctx.clock) }));
    const res = await floor.post('/__bench/floor').send({});
    expect(res.status).toBe(201);
    expect(res.body.data.id).toMatch(/^BF_/);
    const rows = await ctx.testDb.database.db('bench_floor').select('id');
    expect(rows.map((r) => r.id)).toEqual([res.body.data.id]);
  });

  it('has a minimal read beside it: one row of a copy of checkout_sessions by id, as JSON, without authentication', async () => {
    expect((await merchant.get('/__bench/read/cs_bench').set('X-API-Key', ctx.orgA.apiKey)).status).toBe(404);
    for (const statement of BENCH_READ_TABLE_SQL.split(';')) await ctx.testDb.database.db.raw(statement);
    await ctx.testDb.database.db('bench_read').insert({ id: 'cs_bench', org_id: 'org_bench', status: 'CREATED', amount: 1500, metadata: JSON.stringify({ a: 'b' }) });
    const read = supertest(await createMerchantApp(ctx.deps, { extraRoutes: (router) => registerBenchFloor(router, new BenchFloorRepository(ctx.testDb.database.db), ctx.clock) }));
    const res = await read.get('/__bench/read/cs_bench');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: 'cs_bench', org_id: 'org_bench', status: 'CREATED', amount: 1500, metadata: { a: 'b' }, customer_email: null });
    expect(Object.keys(res.body.data)).toContain('page_token');
    expect((await read.get('/__bench/read/cs_none')).status).toBe(404);
  });
});
