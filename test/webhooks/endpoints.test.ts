/** Webhook endpoint management: /v1/webhook (merchant API). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => {
  await ctx?.close();
});

// No DNS in CI: public endpoints are IP literals (a public address, not a documentation range).
const PUBLIC = 'https://93.184.216.34';
const asA = (req: import('supertest').Test) => req.set('X-API-Key', ctx.orgA.apiKey);
const asB = (req: import('supertest').Test) => req.set('X-API-Key', ctx.orgB.apiKey);

async function create(body: Record<string, unknown>, as = asA) {
  return as(ctx.merchant.post('/v1/webhook')).send(body);
}

describe('POST /v1/webhook', () => {
  it('creates an endpoint with the defaults (every event, enabled)', async () => {
    ctx.clock.advance(1000);
    const res = await create({ name: 'Fulfilment', url: `${PUBLIC}/hooks/kassa` });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      message: 'Webhook endpoint created',
      data: {
        id: expect.stringMatching(/^WHE_[0-9A-Za-z]{24}$/),
        name: 'Fulfilment',
        url: `${PUBLIC}/hooks/kassa`,
        events: [],
        enabled: true,
        createdAt: ctx.clock.now().toISOString(),
        updatedAt: ctx.clock.now().toISOString(),
      },
    });
  });

  it('keeps an event selection and a disabled flag', async () => {
    ctx.clock.advance(1000);
    const res = await create({ name: 'Paid only', url: `${PUBLIC}/paid`, events: ['order.paid', 'subscription.ended'], enabled: false });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ events: ['order.paid', 'subscription.ended'], enabled: false });
  });

  it.each([
    ['an unknown field', { name: 'x', url: `${PUBLIC}/a`, secret: 'nope' }],
    ['a missing url', { name: 'x' }],
    ['an empty name', { name: '', url: `${PUBLIC}/a` }],
    ['an http URL', { name: 'x', url: 'http://93.184.216.34/a' }],
    ['credentials in the URL', { name: 'x', url: 'https://user:secret@93.184.216.34/a' }],
    ['a username alone', { name: 'x', url: 'https://user@93.184.216.34/a' }],
    ['an unknown event type', { name: 'x', url: `${PUBLIC}/a`, events: ['order.shipped'] }],
    ['a repeated event type', { name: 'x', url: `${PUBLIC}/a`, events: ['order.paid', 'order.paid'] }],
    ['a relative URL', { name: 'x', url: '/hooks' }],
  ])('refuses %s with 400', async (_why, body) => {
    const res = await create(body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
  });

  it.each([
    ['loopback', 'https://127.0.0.1/hook'],
    ['loopback, other /8 address', 'https://127.10.0.1:8443/hook'],
    ['loopback by name', 'https://localhost/hook'],
    ['loopback in hex form', 'https://0x7f000001/hook'],
    ['IPv6 loopback', 'https://[::1]/hook'],
    ['IPv4-mapped IPv6 loopback', 'https://[::ffff:127.0.0.1]/hook'],
    ['private 10/8', 'https://10.0.0.8/hook'],
    ['private 172.16/12', 'https://172.16.5.4/hook'],
    ['private 192.168/16', 'https://192.168.1.1/hook'],
    ['link-local / AWS metadata', 'https://169.254.169.254/latest/meta-data/'],
    ['Alibaba metadata (CGNAT range)', 'https://100.100.100.200/hook'],
    ['GCP metadata by name', 'https://metadata.google.internal/computeMetadata/v1/'],
    ['unspecified', 'https://0.0.0.0/hook'],
    ['IPv6 unique-local (AWS IPv6 metadata)', 'https://[fd00:ec2::254]/hook'],
    ['IPv6 link-local', 'https://[fe80::1]/hook'],
  ])('refuses a URL that reaches %s (SSRF) with 400', async (_why, url) => {
    const res = await create({ name: 'ssrf', url });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.message).toMatch(/^body\.url host .*(loopback|private|metadata)/);
  });

  // IPv6 forms that carry an IPv4 address: the IPv4 address is what the traffic reaches.
  const TRANSITION_FORMS = [
    ['IPv4-compatible loopback', 'https://[::7f00:1]/hook'],
    ['IPv4-compatible loopback, dotted', 'https://[::127.0.0.1]/hook'],
    ['IPv4-compatible link-local (AWS metadata)', 'https://[::a9fe:a9fe]/latest/meta-data/'],
    ['IPv4-translated private', 'https://[::ffff:0:10.0.0.1]/hook'],
    ['NAT64 of a private address', 'https://[64:ff9b::10.0.0.1]/hook'],
    ['local-use NAT64 of the metadata address', 'https://[64:ff9b:1::169.254.169.254]/hook'],
    ['6to4 of loopback', 'https://[2002:7f00:1::]/hook'],
    ['Teredo with a loopback client', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook'],
    ['IPv6 documentation range', 'https://[2001:db8::1]/hook'],
    ['IPv6 outside global unicast', 'https://[4000::1]/hook'],
  ] as const;

  it.each(TRANSITION_FORMS)('refuses a URL that reaches %s through an IPv6 form (SSRF) with 400', async (_why, url) => {
    const res = await create({ name: 'ssrf', url });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR' } });
    expect(res.body.message).toMatch(/^body\.url host .*loopback, private, link-local, reserved or metadata address$/);
  });

  it('accepts the same forms when they carry a public IPv4 address', async () => {
    for (const url of ['https://[::ffff:93.184.216.34]/hook', 'https://[64:ff9b::93.184.216.34]/hook', 'https://[2002:5db8:d822::1]/hook']) {
      const res = await create({ name: 'public via IPv6', url });
      expect(res.status, url).toBe(201);
      expect((await asA(ctx.merchant.delete(`/v1/webhook/${res.body.data.id}`))).status).toBe(200);
    }
  });

  it('refuses a host that does not resolve', async () => {
    const res = await create({ name: 'nx', url: 'https://does-not-exist.invalid/hook' });
    expect(res.status).toBe(400);
    expect(res.body.message).toBe('body.url host does-not-exist.invalid does not resolve');
  });

  it('needs the webhooks:write permission', async () => {
    const key = await ctx.services.orgs.createApiKey(ctx.orgA.orgId, { name: 'orders only', permissions: ['orders:read'] });
    const res = await ctx.merchant.post('/v1/webhook').set('X-API-Key', key.key).send({ name: 'x', url: `${PUBLIC}/a` });
    expect(res.status).toBe(403);
    expect((await ctx.merchant.get('/v1/webhook').set('X-API-Key', key.key)).status).toBe(403);
    expect((await ctx.merchant.get('/v1/webhook')).status).toBe(401);
  });
});

describe('GET /v1/webhook and /v1/webhook/{id}', () => {
  it('lists the organization’s endpoints newest first, paginated, never another organization’s', async () => {
    const b = await create({ name: 'B only', url: `${PUBLIC}/b` }, asB);
    expect(b.status).toBe(201);
    const list = await asA(ctx.merchant.get('/v1/webhook?size=1'));
    expect(list.status).toBe(200);
    expect(list.body.data).toMatchObject({ total: 2, page: 1, size: 1, pages: 2, current: 1 });
    expect(list.body.data.records[0].name).toBe('Paid only');
    const second = await asA(ctx.merchant.get('/v1/webhook?page=2&size=1'));
    expect(second.body.data.records[0].name).toBe('Fulfilment');
    const ofB = await asB(ctx.merchant.get('/v1/webhook'));
    expect(ofB.body.data.records.map((r: { id: string }) => r.id)).toEqual([b.body.data.id]);
  });

  it('reads one endpoint; another organization’s or an unknown one is 404', async () => {
    const created = await create({ name: 'Read me', url: `${PUBLIC}/r` });
    const id = created.body.data.id;
    const res = await asA(ctx.merchant.get(`/v1/webhook/${id}`));
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(created.body.data);
    expect(res.body.message).toBe('Webhook endpoint retrieved');
    const foreign = await asB(ctx.merchant.get(`/v1/webhook/${id}`));
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    expect((await asA(ctx.merchant.get('/v1/webhook/WHE_000000000000000000000000'))).status).toBe(404);
    expect((await asA(ctx.merchant.get('/v1/webhook/not-an-id'))).status).toBe(404);
  });
});

describe('PATCH /v1/webhook/{id} and PATCH /v1/webhook?id=', () => {
  it('changes some fields and moves updatedAt', async () => {
    const created = (await create({ name: 'Patch me', url: `${PUBLIC}/p`, events: ['order.paid'] })).body.data;
    ctx.clock.advance(60_000);
    const res = await asA(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({ url: `${PUBLIC}/p2`, events: [] });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ ...created, url: `${PUBLIC}/p2`, events: [], updatedAt: ctx.clock.now().toISOString() });
    const byQuery = await asA(ctx.merchant.patch(`/v1/webhook?id=${created.id}`)).send({ enabled: false, name: 'Renamed' });
    expect(byQuery.status).toBe(200);
    expect(byQuery.body.data).toMatchObject({ id: created.id, enabled: false, name: 'Renamed', url: `${PUBLIC}/p2` });
  });

  it('refuses an empty body, unknown fields and unsafe URLs, leaving the endpoint unchanged', async () => {
    const created = (await create({ name: 'Guarded', url: `${PUBLIC}/g` })).body.data;
    expect((await asA(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({})).status).toBe(400);
    expect((await asA(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({ secret: 'x' })).status).toBe(400);
    const ssrf = await asA(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({ url: 'https://169.254.169.254/' });
    expect(ssrf.status).toBe(400);
    expect((await asA(ctx.merchant.get(`/v1/webhook/${created.id}`))).body.data).toEqual(created);
    // The query form needs its id.
    expect((await asA(ctx.merchant.patch('/v1/webhook')).send({ enabled: false })).status).toBe(400);
  });

  it('refuses a URL reaching a private address through an IPv6 transition form, leaving the endpoint unchanged', async () => {
    const created = (await create({ name: 'Guarded v6', url: `${PUBLIC}/g6` })).body.data;
    for (const url of ['https://[::7f00:1]/', 'https://[::127.0.0.1]/', 'https://[::a9fe:a9fe]/', 'https://[2002:7f00:1::]/', 'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/']) {
      const byPath = await asA(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({ url });
      expect(byPath.status, url).toBe(400);
      expect(byPath.body.error.code).toBe('VALIDATION_ERROR');
      expect((await asA(ctx.merchant.patch(`/v1/webhook?id=${created.id}`)).send({ url })).status, url).toBe(400);
    }
    expect((await asA(ctx.merchant.get(`/v1/webhook/${created.id}`))).body.data).toEqual(created);
  });

  it('404s another organization’s endpoint in both forms, before looking at the body', async () => {
    const created = (await create({ name: 'Mine', url: `${PUBLIC}/m` })).body.data;
    expect((await asB(ctx.merchant.patch(`/v1/webhook/${created.id}`)).send({ enabled: false })).status).toBe(404);
    expect((await asB(ctx.merchant.patch(`/v1/webhook?id=${created.id}`)).send({ url: 'https://10.0.0.1/' })).status).toBe(404);
    expect((await asA(ctx.merchant.get(`/v1/webhook/${created.id}`))).body.data.enabled).toBe(true);
  });
});

describe('DELETE /v1/webhook/{id} and DELETE /v1/webhook?id=', () => {
  it('answers 200 with the deleted endpoint; then it is gone (404 on read and on a second delete)', async () => {
    const created = (await create({ name: 'Delete me', url: `${PUBLIC}/d` })).body.data;
    const res = await asA(ctx.merchant.delete(`/v1/webhook/${created.id}`));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: 'Webhook endpoint deleted', data: created });
    expect((await asA(ctx.merchant.get(`/v1/webhook/${created.id}`))).status).toBe(404);
    expect((await asA(ctx.merchant.delete(`/v1/webhook/${created.id}`))).status).toBe(404);
    const other = (await create({ name: 'Delete by query', url: `${PUBLIC}/dq` })).body.data;
    expect((await asB(ctx.merchant.delete(`/v1/webhook?id=${other.id}`))).status).toBe(404);
    expect((await asA(ctx.merchant.delete(`/v1/webhook?id=${other.id}`))).status).toBe(200);
    expect((await asA(ctx.merchant.delete(`/v1/webhook?id=${other.id}`))).status).toBe(404);
  });
});

describe('the 20-endpoint cap', () => {
  it('refuses the 21st live endpoint with 409; deleted endpoints do not count', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Capped' });
    const key = (await ctx.services.orgs.createApiKey(org.id, {})).key;
    const as = (req: import('supertest').Test) => req.set('X-API-Key', key);
    const ids: string[] = [];
    // Concurrent creations must not overshoot the cap.
    const results = await Promise.all(Array.from({ length: 22 }, (_, i) => create({ name: `e${i}`, url: `${PUBLIC}/${i}` }, as)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(20);
    const refused = results.filter((r) => r.status === 409);
    expect(refused).toHaveLength(2);
    expect(refused[0]!.body).toEqual({
      success: false,
      message: 'An organization can have at most 20 webhook endpoints',
      error: { code: 'CONFLICT', message: 'An organization can have at most 20 webhook endpoints' },
    });
    for (const r of results) if (r.status === 201) ids.push(r.body.data.id);
    expect((await as(ctx.merchant.delete(`/v1/webhook/${ids[0]}`))).status).toBe(200);
    expect((await create({ name: 'after delete', url: `${PUBLIC}/again` }, as)).status).toBe(201);
    expect((await create({ name: 'over', url: `${PUBLIC}/over` }, as)).status).toBe(409);
  });
});

describe('WEBHOOK_ALLOW_LOOPBACK', () => {
  it('lets loopback through for local development, and nothing else', async () => {
    const dev = await createTestContext({ env: { WEBHOOK_ALLOW_LOOPBACK: 'true' } });
    try {
      const as = (req: import('supertest').Test) => req.set('X-API-Key', dev.orgA.apiKey);
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://127.0.0.1:8443/hook' })).status).toBe(201);
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://localhost:8443/hook' })).status).toBe(201);
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://10.0.0.1/hook' })).status).toBe(400);
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://169.254.169.254/' })).status).toBe(400);
      // Loopback as a socket reaches it, not an IPv6 form routed elsewhere (a tunnel, a translator).
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://[::1]:8443/hook' })).status).toBe(201);
      expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url: 'https://[::ffff:127.0.0.1]:8443/hook' })).status).toBe(201);
      for (const url of ['https://[::7f00:1]/', 'https://[2002:7f00:1::]/', 'https://[64:ff9b::a9fe:a9fe]/']) {
        expect((await as(dev.merchant.post('/v1/webhook')).send({ name: 'dev', url })).status, url).toBe(400);
      }
    } finally {
      await dev.close();
    }
  });
});
