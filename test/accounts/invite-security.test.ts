/**
 * Issue 37, accounts: invites and the second factor under attack. The exact attack of item 1 (an
 * admin of another organization who knows a member's password invites the member's address,
 * accepts, switches into the member's organization that requires a passkey and makes an API
 * key); session strength at every door that requires a second factor (switch, invite
 * acceptance, sign-in links, adding a passkey); invites that go to the mailbox only (item 3) and
 * the operator's reset that lists and removes passkeys and sessions; no password oracle and no way
 * past a lockout at acceptance (item 4); one answer whether or not an address has an account
 * (item 9); the arrival by switch in the audit log (item 10); the demo owner's password (item 13);
 * an invite not spent by a mistyped password (item 15).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, PASSWORD, as, linkToken, sessionCookieOf, signIn, signUp, uniqueEmail, type Member } from './helpers.js';
import { SoftAuthenticator, type SoftCredential } from './soft-authenticator.js';
import { startSmtp } from '../buyer-emails/smtp.js';

let ctx: TestContext;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let address = 0;
const fromNewAddress = () => `198.51.100.${++address}`;

beforeAll(async () => {
  smtp = await startSmtp();
  ctx = await createTestContext({ env: { TRUST_PROXY: '1', SMTP_URL: `${smtp.url}/?ignoreTLS=true`, SMTP_FROM: 'accounts@kassa.test' } });
}, 180_000);
afterAll(async () => {
  await ctx?.close();
  await smtp?.close();
});
beforeEach(() => {
  smtp.received.length = 0;
});

const accept = (body: Record<string, unknown>, from = fromNewAddress()) => ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).set('X-Forwarded-For', from).send(body);
const operatorInvite = async (orgId: string, email: string, role = 'developer') => {
  const res = await ctx.admin.post(`/v1/orgs/${orgId}/invites`).send({ email, role });
  expect(res.status, res.text).toBe(201);
  return linkToken(res.body.data.url);
};
const member = (res: import('supertest').Response, email: string): Member => {
  const cookie = sessionCookieOf(res)!;
  return { email, userId: res.body.data.user.userId, cookie, token: cookie.split('=')[1]!, csrf: res.body.data.csrfToken };
};

async function newOrg(label: string) {
  const created = await ctx.admin.post('/v1/orgs').send({ name: `${label} ${Date.now()}` });
  expect(created.status, created.text).toBe(201);
  return created.body.data.orgId as string;
}

async function addPasskey(m: Member, authenticator = new SoftAuthenticator()): Promise<SoftCredential> {
  const options = await as(m, ctx.merchant.post('/v1/console/passkeys/registration-options'));
  expect(options.status, options.text).toBe(200);
  const { credential, json } = authenticator.create(options.body.data.publicKey, ORIGIN);
  const res = await as(m, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.body.data.challengeId, credential: json });
  expect(res.status, res.text).toBe(201);
  return credential;
}

/** A password then the passkey: a session of strength password_passkey. */
async function signInWithBoth(email: string, authenticator: SoftAuthenticator, credential: SoftCredential): Promise<Member> {
  const from = fromNewAddress();
  const first = await signIn(ctx, email, PASSWORD, from);
  expect(first.status, first.text).toBe(202);
  const res = await ctx.merchant
    .post('/v1/console/sign-in/second-factor')
    .set('Origin', ORIGIN)
    .set('X-Forwarded-For', from)
    .send({ challengeId: first.body.data.challengeId, credential: authenticator.get(first.body.data.publicKey, ORIGIN, credential) });
  expect(res.status, res.text).toBe(200);
  return member(res, email);
}

/** Org A requires a second factor; its owner (the victim) has a passkey and is also a member of org B. */
async function victimSetup() {
  const orgA = await newOrg('Victim org');
  const orgB = await newOrg('Attacker org');
  const victim = await signUp(ctx, orgA, 'owner');
  const authenticator = new SoftAuthenticator();
  const credential = await addPasskey(victim, authenticator);
  expect((await as(victim, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true })).status).toBe(200);
  const attacker = await signUp(ctx, orgB, 'admin');
  return { orgA, orgB, victim, authenticator, credential, attacker };
}

describe('item 1: an invite never signs in an existing account by its password', () => {
  it('the attack: an admin of B who knows the member\'s password invites, accepts, switches into A (passkey required) and makes a key — refused at the first step, the invite unspent', async () => {
    const { orgA, orgB, victim, attacker } = await victimSetup();
    smtp.received.length = 0;
    const created = await as(attacker, ctx.merchant.post('/v1/console/invites')).send({ email: victim.email, role: 'viewer' });
    expect(created.status, created.text).toBe(201);
    // The attacker's link: the answer's (before issue 37), else the operator's copy (as if he got it anyway).
    const url: string = created.body.data.url ?? (await ctx.admin.post(`/v1/orgs/${orgB}/invites/${created.body.data.inviteId}/link`)).body.data.url;
    // The whole chain, as the attacker runs it.
    const accepted = await accept({ token: linkToken(url), password: PASSWORD });
    const steps: Record<string, number> = { accept: accepted.status };
    if (sessionCookieOf(accepted)) {
      const switched = await as(member(accepted, victim.email), ctx.merchant.put('/v1/console/session/organization')).send({ orgId: orgA });
      steps.switch = switched.status;
      if (sessionCookieOf(switched)) steps.apiKey = (await as(member(switched, victim.email), ctx.merchant.post('/v1/console/api-keys')).send({ name: 'attacker' })).status;
    }
    expect(steps).toEqual({ accept: 401 });
    expect(accepted.body.error.message).toContain('sign in to it first');
    // Nor does the sign-in give a session: the account has a passkey.
    expect((await signIn(ctx, victim.email, PASSWORD, fromNewAddress())).status).toBe(202);
    // The invite is still pending, for the real owner of the address, who got it by e-mail.
    expect(smtp.received.filter((m) => m.to.includes(victim.email))).toHaveLength(1);
    const invites = await as(attacker, ctx.merchant.get('/v1/console/invites'));
    expect(invites.body.data.find((i: { inviteId: string }) => i.inviteId === created.body.data.inviteId).status).toBe('PENDING');
  });

  it('switching into an organization that requires a second factor needs a session that used the passkey (403 SECOND_FACTOR_REQUIRED otherwise)', async () => {
    const { orgA, orgB, victim, authenticator, credential } = await victimSetup();
    // The victim joins B as themselves (a session that used the passkey).
    const strong = await signInWithBoth(victim.email, authenticator, credential);
    expect((await ctx.testDb.database.db('console_sessions').where({ id: (await as(strong, ctx.merchant.get('/v1/console/session'))).body.data.sessionId }).first()).strength).toBe('password_passkey');
    const invite = await operatorInvite(orgB, victim.email);
    const joined = await as(strong, ctx.merchant.post('/v1/console/invites/accept')).send({ token: invite });
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body.data).toMatchObject({ organization: { orgId: orgB }, strength: 'password_passkey' });
    // The same session, had it been signed in by the password alone (as a session from before the
    // account's passkey, or from before this change, is).
    const inB = member(joined, victim.email);
    await ctx.testDb.database.db('console_sessions').where({ id: joined.body.data.sessionId }).update({ strength: 'password' });
    const refused = await as(inB, ctx.merchant.put('/v1/console/session/organization')).send({ orgId: orgA });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.error.code).toBe('SECOND_FACTOR_REQUIRED');
    expect(sessionCookieOf(refused)).toBeUndefined();
    // The passkey sign-in enters it.
    const passkeyOptions = await ctx.merchant.post('/v1/console/passkeys/sign-in-options').set('Origin', ORIGIN);
    const viaPasskey = await ctx.merchant
      .post('/v1/console/passkeys/sign-in')
      .set('Origin', ORIGIN)
      .set('X-Forwarded-For', fromNewAddress())
      .send({ challengeId: passkeyOptions.body.data.challengeId, credential: authenticator.get(passkeyOptions.body.data.publicKey, ORIGIN, credential) });
    expect(viaPasskey.status, viaPasskey.text).toBe(200);
    expect(viaPasskey.body.data.strength).toBe('passkey');
    const toB = await as(member(viaPasskey, victim.email), ctx.merchant.put('/v1/console/session/organization')).send({ orgId: orgB });
    expect(toB.status).toBe(200);
    const backToA = await as(member(toB, victim.email), ctx.merchant.put('/v1/console/session/organization')).send({ orgId: orgA });
    expect(backToA.status, backToA.text).toBe(200);
    expect(backToA.body.data).toMatchObject({ organization: { orgId: orgA }, strength: 'passkey', secondFactor: { required: true, restricted: false } });
    // Item 10: each arrival by switch is in the target organization's audit log, with how the session signed in.
    const audit = await as(member(backToA, victim.email), ctx.merchant.get('/v1/console/audit-log?size=100'));
    const arrivals = audit.body.data.records.filter((e: { action: string }) => e.action === 'session.switch_in');
    expect(arrivals.map((e: { summary: string }) => e.summary)).toEqual([`switched in from ${orgB}; signed in with a passkey`]);
    expect(arrivals[0].targetId).toBe(backToA.body.data.sessionId);
  });

  it('a session without the passkey is restricted in such an organization and cannot give itself another passkey', async () => {
    const { orgA, victim, authenticator, credential } = await victimSetup();
    const strong = await signInWithBoth(victim.email, authenticator, credential);
    expect((await as(strong, ctx.merchant.get('/v1/orders'))).status).toBe(200);
    // The same session, had it been signed in by the password alone (as sessions before this change are).
    const sessionId = (await as(strong, ctx.merchant.get('/v1/console/session'))).body.data.sessionId;
    await ctx.testDb.database.db('console_sessions').where({ id: sessionId }).update({ strength: 'password' });
    const orders = await as(strong, ctx.merchant.get('/v1/orders'));
    expect(orders.status).toBe(403);
    expect(orders.body.error).toMatchObject({ code: 'SECOND_FACTOR_REQUIRED', message: expect.stringContaining('sign in again with your passkey') });
    expect((await as(strong, ctx.merchant.get('/v1/console/session'))).body.data).toMatchObject({ organization: { orgId: orgA }, strength: 'password', secondFactor: { required: true, enrolled: true, restricted: true } });
    const more = await as(strong, ctx.merchant.post('/v1/console/passkeys/registration-options'));
    expect(more.status).toBe(403);
    expect(more.body.error.code).toBe('SECOND_FACTOR_REQUIRED');
  });

  it('accepting as yourself into an organization that requires a second factor needs the passkey too (invite unspent)', async () => {
    const { orgA, victim, authenticator, credential } = await victimSetup();
    const orgC = await newOrg('Plain org');
    const token = await operatorInvite(orgC, victim.email);
    const strong = await signInWithBoth(victim.email, authenticator, credential);
    // Into C (no requirement), then a weak session there cannot accept into a requiring org.
    const inC = await as(strong, ctx.merchant.post('/v1/console/invites/accept')).send({ token });
    expect(inC.status, inC.text).toBe(200);
    const orgD = await newOrg('Strict org');
    const ownerD = await signUp(ctx, orgD, 'owner');
    await addPasskey(ownerD);
    expect((await as(ownerD, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true })).status).toBe(200);
    const tokenD = await operatorInvite(orgD, victim.email);
    const weak = member(inC, victim.email);
    await ctx.testDb.database.db('console_sessions').where({ id: inC.body.data.sessionId }).update({ strength: 'password' });
    const refused = await as(weak, ctx.merchant.post('/v1/console/invites/accept')).send({ token: tokenD });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.error.code).toBe('SECOND_FACTOR_REQUIRED');
    const again = await signInWithBoth(victim.email, authenticator, credential);
    const ok = await as(again, ctx.merchant.post('/v1/console/invites/accept')).send({ token: tokenD });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.organization.orgId).toBe(orgD);
    void orgA;
  });

  it('an invite for another address is refused to a signed-in account (403), and the CSRF token is required with the cookie', async () => {
    const someone = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const token = await operatorInvite(ctx.orgB.orgId, uniqueEmail('other'));
    const noCsrf = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).set('Cookie', someone.cookie).send({ token });
    expect(noCsrf.status).toBe(403);
    const other = await as(someone, ctx.merchant.post('/v1/console/invites/accept')).send({ token });
    expect(other.status).toBe(403);
    expect(other.body.error.message).toContain('another e-mail address');
  });

  it('a one-time sign-in link never signs in an account that has a passkey (403 SECOND_FACTOR_REQUIRED); without one, its session is of strength link', async () => {
    const accounts = ctx.services.modules.accounts.accounts;
    const plain = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const { url } = await accounts.createSignInLink(ctx.orgA.orgId, plain.userId);
    const redeemed = await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token: linkToken(url) });
    expect(redeemed.status).toBe(200);
    expect(redeemed.body.data.strength).toBe('link');
    const withKey = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    await addPasskey(withKey);
    const link = await accounts.createSignInLink(ctx.orgA.orgId, withKey.userId);
    const refused = await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token: linkToken(link.url) });
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('SECOND_FACTOR_REQUIRED');
    expect(sessionCookieOf(refused)).toBeUndefined();
  });
});

describe('items 4, 9, 13, 15: acceptance checks no password of an existing account', () => {
  it('item 4: a locked-out account is not signed in through an invite, and acceptance is no password oracle', async () => {
    const m = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const from = fromNewAddress();
    for (let i = 0; i < 5; i++) expect((await signIn(ctx, m.email, 'not the password at all', from)).status).toBe(401);
    expect((await signIn(ctx, m.email, PASSWORD, fromNewAddress())).status).toBe(429);
    const token = await operatorInvite(ctx.orgB.orgId, m.email);
    const right = await accept({ token, password: PASSWORD });
    const wrong = await accept({ token, password: 'not the password at all' });
    expect(right.status).toBe(401);
    expect(wrong.status).toBe(401);
    expect(right.body).toEqual(wrong.body);
    expect(sessionCookieOf(right)).toBeUndefined();
  });

  it('item 9: one answer whether or not the address has an account (a short password is the same 400)', async () => {
    const existing = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const forExisting = await accept({ token: await operatorInvite(ctx.orgB.orgId, existing.email), password: 'short' });
    const forNew = await accept({ token: await operatorInvite(ctx.orgB.orgId, uniqueEmail('nobody')), password: 'short' });
    expect(forExisting.status).toBe(400);
    expect(forExisting.body).toEqual(forNew.body);
    const missingExisting = await accept({ token: await operatorInvite(ctx.orgB.orgId, existing.email) });
    const missingNew = await accept({ token: await operatorInvite(ctx.orgB.orgId, uniqueEmail('nobody')) });
    expect(missingExisting.status).toBe(400);
    expect(missingExisting.body).toEqual(missingNew.body);
  });

  it('item 13: the demo owner (an account without a password) gets no password through an invite', async () => {
    const accounts = ctx.services.modules.accounts.accounts;
    const email = uniqueEmail('demo-owner');
    await accounts.ensureMember(ctx.orgA.orgId, email, 'owner', 'Demo owner');
    const token = await operatorInvite(ctx.orgB.orgId, email);
    const res = await accept({ token, password: 'the attacker chose this one' });
    expect(res.status).toBe(401);
    expect((await ctx.testDb.database.db('users').whereRaw('lower(email) = lower(?)', [email]).first()).password_hash).toBeNull();
    expect((await signIn(ctx, email, 'the attacker chose this one', fromNewAddress())).status).toBe(401);
  });

  it('item 15: a mistyped (too short) password does not spend the invite', async () => {
    const email = uniqueEmail('typo');
    const token = await operatorInvite(ctx.orgB.orgId, email);
    expect((await accept({ token, password: 'short' })).status).toBe(400);
    const ok = await accept({ token, password: PASSWORD });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.strength).toBe('link');
  });
});

describe('item 3: creating an account proves the address; the operator\'s reset shows and removes passkeys and sessions', () => {
  it('a member\'s invite is e-mailed to the address with its link; the answer holds no link; the operator can print a new one (the old stops working)', async () => {
    const owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
    const email = uniqueEmail('invitee');
    const created = await as(owner, ctx.merchant.post('/v1/console/invites')).send({ email, role: 'support' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ email, role: 'support', status: 'PENDING', emailed: true });
    expect(created.text).not.toContain('kinv_');
    const toInvitee = smtp.received.filter((m) => m.to.includes(email));
    expect(toInvitee).toHaveLength(1);
    expect(toInvitee[0]!.raw).toContain('Subject: You are invited to');
    const mailed = /http:\/\/merchant\.test\/console\/accept-invite#token=(kinv_[A-Za-z0-9_-]{43})/.exec(toInvitee[0]!.raw)?.[1];
    expect(mailed).toBeDefined();
    const reissued = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites/${created.body.data.inviteId}/link`);
    expect(reissued.status).toBe(200);
    expect(reissued.headers['cache-control']).toBe('no-store');
    expect((await accept({ token: mailed, password: PASSWORD })).status).toBe(404);
    const ok = await accept({ token: linkToken(reissued.body.data.url), password: PASSWORD });
    expect(ok.status, ok.text).toBe(200);
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites/${created.body.data.inviteId}/link`)).status).toBe(404);
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/invites/LNK_unknown/link`)).status).toBe(404);
  });

  it('the operator\'s password reset lists the account\'s passkeys and sessions and removes them on request', async () => {
    const m = await signUp(ctx, ctx.orgA.orgId, 'developer');
    await addPasskey(m);
    const listed = await ctx.admin.post('/v1/users/password-reset').send({ email: m.email });
    expect(listed.status).toBe(201);
    expect(listed.body.data.passkeys).toHaveLength(1);
    expect(listed.body.data.sessions.map((s: { strength: string }) => s.strength)).toEqual(['link_passkey']);
    expect(listed.body.data).toMatchObject({ removedPasskeys: 0, revokedSessions: 0 });
    const removed = await ctx.admin.post('/v1/users/password-reset').send({ email: m.email, removePasskeys: true, revokeSessions: true });
    expect(removed.status).toBe(201);
    expect(removed.body.data).toMatchObject({ passkeys: [], sessions: [], removedPasskeys: 1, revokedSessions: 1 });
    // Signed out is an answer, not an error (getConsoleSession); the member's own requests are refused.
    expect((await as(m, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    expect((await as(m, ctx.merchant.get('/v1/console/members'))).status).toBe(401);
    // The member's organization sees the operator's removal.
    const owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
    const audit = await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'));
    expect(audit.body.data.records.some((e: { action: string; summary: string; targetId: string }) => e.action === 'password_reset.create' && e.targetId === m.userId && e.summary.includes('removed 1 passkey(s)'))).toBe(true);
  });
});
