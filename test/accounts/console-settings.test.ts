/**
 * The console's organization settings: display name and branding (validated; the text colour on
 * the accent chosen by contrast), crypto receiving wallets, the card processor's status — the
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
