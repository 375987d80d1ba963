/**
 * The console's organization settings: display name and branding (validated; the text colour on
 * the accent chosen by contrast), the time zone (an IANA name, UTC by default), crypto receiving wallets, the card processor's status — the
 * admin API's services for the member's organization, `settings:manage` for owners and admins,
 * no session (401), no CSRF token (403), and the audit entry of each change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, as, signUp, type Member } from './helpers.js';
import { contrastRatio, textColourOn } from '../../src/kernel/colour.js';

let ctx: TestContext;
let ownerA: Member;
let adminA: Member;
let supportA: Member;
let developerA: Member;
let viewerA: Member;
let ownerB: Member;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  [ownerA, adminA, supportA, developerA, viewerA, ownerB] = await Promise.all([
    signUp(ctx, ctx.orgA.orgId, 'owner'),
    signUp(ctx, ctx.orgA.orgId, 'admin'),
    signUp(ctx, ctx.orgA.orgId, 'support'),
    signUp(ctx, ctx.orgA.orgId, 'developer'),
    signUp(ctx, ctx.orgA.orgId, 'viewer'),
    signUp(ctx, ctx.orgB.orgId, 'owner'),
  ]);
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const settings = (m: Member) => as(m, ctx.merchant.get('/v1/console/organization'));
const update = (m: Member, body: object) => as(m, ctx.merchant.patch('/v1/console/organization')).send(body);
const ADDRESS = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

describe('contrast', () => {
  it('picks black or white text by WCAG contrast, at least 4.5:1 on the usual accents', () => {
    expect(textColourOn('#ffffff')).toBe('#000000');
    expect(textColourOn('#000000')).toBe('#ffffff');
    expect(textColourOn('#4338ca')).toBe('#ffffff');
    expect(textColourOn('#facc15')).toBe('#000000');
    for (const accent of ['#4338ca', '#0f766e', '#facc15', '#ef4444', '#22c55e', '#777777']) {
      expect(contrastRatio(accent, textColourOn(accent))).toBeGreaterThanOrEqual(4.5);
    }
  });
});

describe('organization settings', () => {
  it('every member reads them; an owner sets the display name and branding; the colour is stored lower case with its text colour', async () => {
    const read = await settings(viewerA);
    expect(read.status).toBe(200);
    expect(read.body.data).toMatchObject({ orgId: ctx.orgA.orgId, branding: { logoUrl: null, accentColor: null, accentTextColor: '#ffffff' } });

    const changed = await update(ownerA, { displayName: 'Acme Roasters', branding: { logoUrl: 'https://cdn.example.com/logo.png', accentColor: '#FACC15' } }).set('X-Forwarded-For', '198.51.100.7');
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject({
      displayName: 'Acme Roasters',
      branding: { logoUrl: 'https://cdn.example.com/logo.png', accentColor: '#facc15', accentTextColor: '#000000' },
    });
    // One field at a time; null clears.
    const cleared = await update(adminA, { branding: { logoUrl: null } });
    expect(cleared.body.data.branding).toEqual({ logoUrl: null, accentColor: '#facc15', accentTextColor: '#000000' });
    const named = await update(adminA, { displayName: null });
    expect(named.body.data.displayName).toBeNull();

    const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
    const entry = log.body.data.records.find((r: { action: string; actorId: string }) => r.action === 'organization.update' && r.actorId === ownerA.userId);
    expect(entry).toMatchObject({ targetType: 'organization', targetId: ctx.orgA.orgId, clientAddress: '198.51.100.7' });
    expect(entry.summary).toContain('fields: displayName, branding');
    expect(entry.summary).not.toContain('cdn.example.com');
  });

  it('refuses a bad colour, a non-https logo, a logo with credentials (400, naming the field)', async () => {
    for (const body of [
      { branding: { accentColor: 'red' } },
      { branding: { accentColor: '#12345' } },
      { branding: { logoUrl: 'http://cdn.example.com/logo.png' } },
      { branding: { logoUrl: 'javascript:alert(1)' } },
      { branding: { logoUrl: 'data:image/png;base64,AAAA' } },
      { branding: { logoUrl: 'https://user:pw@cdn.example.com/logo.png' } },
      { branding: {} },
      {},
    ]) {
      const refused = await update(ownerA, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error.code).toBe('VALIDATION_ERROR');
    }
  });

  it('support, developer and viewer cannot change them (403); each member sees only their organization; no session 401; no CSRF 403', async () => {
    for (const m of [supportA, developerA, viewerA]) {
      const refused = await update(m, { displayName: 'Hijacked' });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('FORBIDDEN');
    }
    const b = await settings(ownerB);
    expect(b.body.data.orgId).toBe(ctx.orgB.orgId);
    await update(ownerB, { displayName: 'Org B display' });
    expect((await settings(ownerA)).body.data.displayName).not.toBe('Org B display');
    expect((await ctx.merchant.get('/v1/console/organization')).status).toBe(401);
    const noCsrf = await ctx.merchant.patch('/v1/console/organization').set('Cookie', ownerA.cookie).set('Origin', ORIGIN).send({ displayName: 'No CSRF' });
    expect(noCsrf.status).toBe(403);
    expect((await settings(ownerA)).body.data.displayName).not.toBe('No CSRF');
  });
});

describe('time zone', () => {
  it("is UTC until changed: the test organizations (the column default of migration 0201) and one created now", async () => {
    expect((await settings(viewerA)).body.data.timeZone).toBe('UTC');
    const created = await ctx.admin.post('/v1/orgs').send({ name: 'Zone default' });
    expect(created.status, created.text).toBe(201);
    const row = await ctx.testDb.database.db('organizations').where({ id: created.body.data.orgId ?? created.body.data.id }).first();
    expect(row.time_zone).toBe('UTC');
  });

  it('an owner or admin sets an IANA name (stored in its canonical spelling); the home page reads it; the change is audited', async () => {
    const set = await update(ownerA, { timeZone: 'Europe/Paris' });
    expect(set.status, set.text).toBe(200);
    expect(set.body.data.timeZone).toBe('Europe/Paris');
    // Only the fields given change.
    expect(set.body.data.branding.accentColor).toBe((await settings(adminA)).body.data.branding.accentColor);
    const lower = await update(adminA, { timeZone: 'america/new_york' });
    expect(lower.body.data.timeZone).toBe('America/New_York');
    expect((await update(adminA, { timeZone: 'utc' })).body.data.timeZone).toBe('UTC');
    expect((await update(adminA, { timeZone: 'Asia/Tokyo' })).body.data.timeZone).toBe('Asia/Tokyo');
    expect((await settings(viewerA)).body.data.timeZone).toBe('Asia/Tokyo');
    // Organization B is untouched.
    expect((await settings(ownerB)).body.data.timeZone).toBe('UTC');
    const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
    const entry = log.body.data.records.find((r: { action: string; summary: string }) => r.action === 'organization.update' && r.summary.includes('timeZone'));
    expect(entry).toBeDefined();
  });

  it('refuses an unknown zone, an offset, an empty or over-long name, a non-string (400 naming timeZone)', async () => {
    const before = (await settings(ownerA)).body.data.timeZone;
    for (const timeZone of ['Mars/Olympus_Mons', 'Europe/Pariss', '+01:00', 'UTC+1', '', 'A'.repeat(65), 'Europe/../Paris', 42, null]) {
      const refused = await update(ownerA, { timeZone });
      expect(refused.status, JSON.stringify(timeZone)).toBe(400);
      expect(refused.body.error.code).toBe('VALIDATION_ERROR');
      expect(JSON.stringify(refused.body.error)).toContain('timeZone');
    }
    expect((await settings(ownerA)).body.data.timeZone).toBe(before);
  });

  it('support, developer and viewer cannot change it (403), and it stays', async () => {
    const before = (await settings(ownerA)).body.data.timeZone;
    for (const m of [supportA, developerA, viewerA]) {
      const refused = await update(m, { timeZone: 'Pacific/Auckland' });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('FORBIDDEN');
    }
    expect((await settings(ownerA)).body.data.timeZone).toBe(before);
  });

  it("every zone the console's select offers (Intl.supportedValuesOf) is one the commerce metrics accept on this database", async () => {
    const zones = ['UTC', ...Intl.supportedValuesOf('timeZone')];
    const db = ctx.testDb.database.db;
    // The metrics bucket in SQL (AT TIME ZONE): the database must know every name Intl offers.
    const { rows } = await db.raw(`SELECT z FROM unnest(?::text[]) z WHERE NOT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = z)`, [zones]);
    const unknown = (rows as Array<{ z: string }>).map((r) => r.z);
    for (const z of unknown) {
      // Not in the view (an alias): the cast still has to work.
      await db.raw(`SELECT now() AT TIME ZONE ?`, [z]);
    }
    const sample = ['UTC', 'Europe/Paris', 'America/Argentina/Buenos_Aires', 'Asia/Kolkata', 'Pacific/Chatham', ...unknown.slice(0, 5)];
    for (const time_zone of sample) {
      const res = await as(viewerA, ctx.merchant.get('/v1/metrics/commerce')).query({ start_date: '2026-11-01', end_date: '2026-11-02', time_zone });
      expect(res.status, `${time_zone}: ${res.text}`).toBe(200);
    }
  });
});

describe('card processor', () => {
  it('an admin sees the sandbox (no connected account); a viewer is refused', async () => {
    const read = await as(adminA, ctx.merchant.get('/v1/console/card-processor'));
    expect(read.status).toBe(200);
    expect(read.body.data).toEqual({ processor: 'sandbox', connectedAccount: null });
    expect((await as(viewerA, ctx.merchant.get('/v1/console/card-processor'))).status).toBe(403);
    expect((await ctx.merchant.get('/v1/console/card-processor')).status).toBe(401);
  });
});

describe('receiving wallets', () => {
  it('an owner sets, lists and removes a wallet; configured chains are listed; each change is audited', async () => {
    const empty = await as(ownerA, ctx.merchant.get('/v1/console/receiving-wallets'));
    expect(empty.status).toBe(200);
    expect(empty.body.data.wallets).toEqual([]);
    const chain = empty.body.data.chains[0];
    expect(chain).toMatchObject({ chainId: expect.any(Number), chain: `eip155:${chain.chainId}`, chainName: expect.any(String) });

    const set = await as(ownerA, ctx.merchant.put(`/v1/console/receiving-wallets/${chain.chainId}`)).send({ address: ADDRESS.toLowerCase() });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ orgId: ctx.orgA.orgId, chainId: chain.chainId, address: ADDRESS });
    const listed = await as(adminA, ctx.merchant.get('/v1/console/receiving-wallets'));
    expect(listed.body.data.wallets).toEqual([expect.objectContaining({ chainId: chain.chainId, address: ADDRESS })]);
    // Org B sees none of A's wallets and cannot remove them.
    expect((await as(ownerB, ctx.merchant.get('/v1/console/receiving-wallets'))).body.data.wallets).toEqual([]);
    expect((await as(ownerB, ctx.merchant.delete(`/v1/console/receiving-wallets/${chain.chainId}`))).status).toBe(404);

    const removed = await as(ownerA, ctx.merchant.delete(`/v1/console/receiving-wallets/${chain.chainId}`));
    expect(removed.status).toBe(200);
    expect((await as(ownerA, ctx.merchant.delete(`/v1/console/receiving-wallets/${chain.chainId}`))).status).toBe(404);

    const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
    const actions = log.body.data.records.filter((r: { targetType: string }) => r.targetType === 'receiving_wallet').map((r: { action: string; targetId: string }) => `${r.action} ${r.targetId}`);
    expect(actions.sort()).toEqual([`receiving_wallet.delete ${chain.chainId}`, `receiving_wallet.set ${chain.chainId}`]);
  });

  it('a bad address, the zero address or an unconfigured chain is 400; support and viewers are refused (403)', async () => {
    const chainId = (await as(ownerA, ctx.merchant.get('/v1/console/receiving-wallets'))).body.data.chains[0].chainId;
    expect((await as(ownerA, ctx.merchant.put(`/v1/console/receiving-wallets/${chainId}`)).send({ address: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD' })).status).toBe(400);
    expect((await as(ownerA, ctx.merchant.put(`/v1/console/receiving-wallets/${chainId}`)).send({ address: `0x${'0'.repeat(40)}` })).status).toBe(400);
    expect((await as(ownerA, ctx.merchant.put('/v1/console/receiving-wallets/999999')).send({ address: ADDRESS })).status).toBe(400);
    for (const m of [supportA, viewerA]) {
      expect((await as(m, ctx.merchant.get('/v1/console/receiving-wallets'))).status).toBe(403);
      expect((await as(m, ctx.merchant.put(`/v1/console/receiving-wallets/${chainId}`)).send({ address: ADDRESS })).status).toBe(403);
      expect((await as(m, ctx.merchant.delete(`/v1/console/receiving-wallets/${chainId}`))).status).toBe(403);
    }
    const noCsrf = await ctx.merchant.put(`/v1/console/receiving-wallets/${chainId}`).set('Cookie', ownerA.cookie).set('Origin', ORIGIN).send({ address: ADDRESS });
    expect(noCsrf.status).toBe(403);
    expect((await ctx.merchant.put(`/v1/console/receiving-wallets/${chainId}`).send({ address: ADDRESS })).status).toBe(401);
  });
});

describe('branding on the buyer side', () => {
  it('the hosted checkout page shows the logo and the accent (readable text colour); the CSP lets the https logo load', async () => {
    await update(ownerA, { displayName: 'Branded Beans', branding: { logoUrl: 'https://cdn.example.com/beans.png', accentColor: '#FACC15' } });
    const product = await ctx.services.catalog.createProduct(ctx.orgA.orgId, { name: 'Beans' });
    const price = await ctx.services.catalog.createPrice(product.id, { amount: 1200, currency: 'USD' });
    const created = await ctx.merchant.post('/v1/checkout-sessions').set('X-API-Key', ctx.orgA.apiKey).set('Idempotency-Key', `brand-${Date.now()}`).send({ pricingId: price.id });
    expect(created.status).toBe(201);
    const page = await ctx.merchant.get(new URL(created.body.data.url).pathname);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<img src="https://cdn.example.com/beans.png" alt="" data-testid="merchant-logo"');
    expect(page.text).toContain('data-testid="merchant">Branded Beans<');
    // Yellow: black text on the buttons; the merchant line keeps the default ink (yellow on white is unreadable).
    expect(page.text).toContain('background:#facc15;color:#000000');
    expect(page.text).toContain('.brand,a,button.link{color:#1d2330}');
    expect(page.headers['content-security-policy']).toContain("img-src 'self' data: https:");

    await update(ownerA, { branding: { accentColor: '#0f766e', logoUrl: null } });
    const again = await ctx.merchant.get(new URL(created.body.data.url).pathname);
    expect(again.text).not.toContain('merchant-logo');
    expect(again.text).toContain('background:#0f766e;color:#ffffff');
    expect(again.text).toContain('.brand,a,button.link{color:#0f766e}');
  });

  it("the customer portal's pages carry the branding too", async () => {
    await update(ownerA, { displayName: 'Portal Beans', branding: { logoUrl: 'https://cdn.example.com/portal.png', accentColor: '#be123c' } });
    const page = await ctx.merchant.get(`/portal/o/${ctx.orgA.orgId}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<img src="https://cdn.example.com/portal.png"');
    expect(page.text).toContain('data-testid="merchant">Portal Beans<');
    expect(page.text).toContain('background:#be123c;color:#ffffff');
  });

  it('buyer e-mails carry the logo and a readable accent', async () => {
    const { renderBuyerEmail } = await import('../../src/buyer-emails/buyer-email.render.js');
    const branded = renderBuyerEmail({ kind: 'payment_receipt', merchant: 'Branded Beans', brand: { logoUrl: 'https://cdn.example.com/beans.png', accentColor: '#0f766e' }, portalUrl: 'https://pay.example.com/portal/o/ORG_1' });
    expect(branded.html).toContain('<img src="https://cdn.example.com/beans.png" alt="Branded Beans"');
    expect(branded.html).toContain('color:#0f766e');
    const pale = renderBuyerEmail({ kind: 'payment_receipt', merchant: 'Pale', brand: { logoUrl: null, accentColor: '#facc15' }, portalUrl: 'https://pay.example.com/portal/o/ORG_1' });
    expect(pale.html).not.toContain('#facc15');
    expect(pale.html).not.toContain('<img');
  });
});
