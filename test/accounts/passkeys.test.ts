/**
 * Passkeys at the API: registration, listing, removal, passwordless sign-in and the second step
 * of a password sign-in, answered by a software authenticator (soft-authenticator.ts) so each
 * check can be broken on purpose: a replayed challenge, another origin, another user's
 * credential or challenge, a counter that went backwards, no user verification. Then an
 * organization's second-factor requirement, role by role, and isolation between organizations.
 * (Chromium's virtual authenticator: test/e2e/passkeys.browser.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, PASSWORD, as, sessionCookieOf, signIn, signUp, type Member } from './helpers.js';
import { SoftAuthenticator, type SoftCredential } from './soft-authenticator.js';
import type { Role } from '../../src/accounts/roles.js';
import { listOperations, loadDocument } from '../../src/http/spec.js';

let ctx: TestContext;
let address = 0;
/** Each test its own client address: the per-address sign-in throttle stays out of the way. */
const fromNewAddress = () => `198.51.100.${++address}`;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

async function registrationOptions(member: Member) {
  const res = await as(member, ctx.merchant.post('/v1/console/passkeys/registration-options'));
  expect(res.status, res.text).toBe(200);
  return res.body.data as { challengeId: string; publicKey: { challenge: string; rp: { id: string }; user: { id: string } } };
}

/** Registers a passkey for a member through the API; the authenticator's credential. */
async function addPasskey(member: Member, authenticator = new SoftAuthenticator(), name?: string): Promise<{ credential: SoftCredential; passkeyId: string }> {
  const options = await registrationOptions(member);
  const { credential, json } = authenticator.create(options.publicKey, ORIGIN);
  const res = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: json, ...(name ? { name } : {}) });
  expect(res.status, res.text).toBe(201);
  return { credential, passkeyId: res.body.data.passkeyId };
}

async function signInOptions() {
  const res = await ctx.merchant.post('/v1/console/passkeys/sign-in-options').set('Origin', ORIGIN);
  expect(res.status, res.text).toBe(200);
  return res.body.data as { challengeId: string; publicKey: { challenge: string; rpId: string } };
}

/** The audit log of the owner's organization, newest first. */
async function auditActions(owner: Member): Promise<Array<{ action: string; summary: string; targetId: string | null }>> {
  const res = await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'));
  expect(res.status).toBe(200);
  return res.body.data.records;
}

describe('registration', () => {
  it('a member adds a passkey: options (RP = PUBLIC_BASE_URL), verify, list; audit passkey.add', async () => {
    const owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
    const options = await as(owner, ctx.merchant.post('/v1/console/passkeys/registration-options'));
    expect(options.status).toBe(200);
    expect(options.headers['cache-control']).toBe('no-store');
    expect(options.body.data.challengeId).toMatch(/^kwc_[A-Za-z0-9_-]{43}$/);
    expect(options.body.data.publicKey).toMatchObject({ rp: { id: 'merchant.test', name: 'Kassa' }, user: { name: owner.email }, attestation: 'none', authenticatorSelection: { residentKey: 'required' }, timeout: 300000 });
    const authenticator = new SoftAuthenticator();
    const { json } = authenticator.create(options.body.data.publicKey, ORIGIN);
    const added = await as(owner, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.body.data.challengeId, credential: json, name: 'Laptop' });
    expect(added.status, added.text).toBe(201);
    expect(added.body.data).toMatchObject({ name: 'Laptop', transports: ['internal'], lastUsedAt: null });
    const listed = await as(owner, ctx.merchant.get('/v1/console/passkeys'));
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((p: { passkeyId: string }) => p.passkeyId)).toEqual([added.body.data.passkeyId]);
    // The next options exclude it.
    const next = await registrationOptions(owner);
    expect((next.publicKey as unknown as { excludeCredentials: Array<{ id: string }> }).excludeCredentials.map((c) => c.id)).toEqual([json.id]);
    const audit = await auditActions(owner);
    expect(audit.find((e) => e.action === 'passkey.add' && e.targetId === added.body.data.passkeyId)?.summary).toBe('added the passkey "Laptop"');
  });

  it('a challenge works once: replayed, it is 400', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const options = await registrationOptions(member);
    const authenticator = new SoftAuthenticator();
    const first = authenticator.create(options.publicKey, ORIGIN);
    expect((await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: first.json })).status).toBe(201);
    const second = authenticator.create(options.publicKey, ORIGIN);
    const replay = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: second.json });
    expect(replay.status).toBe(400);
    expect(replay.body.error.message).toContain('unknown, used or expired');
  });

  it('a challenge past its five minutes is 400', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const options = await registrationOptions(member);
    ctx.clock.advance(5 * 60_000 + 1);
    const late = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: new SoftAuthenticator().create(options.publicKey, ORIGIN).json });
    expect(late.status).toBe(400);
  });

  it('an answer made for another origin, or another RP ID, is refused (400), and spends the challenge', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'support');
    const options = await registrationOptions(member);
    const evil = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: new SoftAuthenticator().create(options.publicKey, 'http://evil.test').json });
    expect(evil.status).toBe(400);
    expect(evil.body.error.message).toContain('could not be verified');
    expect(evil.text).not.toContain('evil.test');
    const again = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: new SoftAuthenticator().create(options.publicKey, ORIGIN).json });
    expect(again.status).toBe(400);
    const other = await registrationOptions(member);
    const wrongRp = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: other.challengeId, credential: new SoftAuthenticator().create(other.publicKey, ORIGIN, { rpId: 'evil.test' }).json });
    expect(wrongRp.status).toBe(400);
  });

  it("another user's challenge is refused (400)", async () => {
    const alice = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const bob = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const options = await registrationOptions(alice);
    const res = await as(bob, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: new SoftAuthenticator().create(options.publicKey, ORIGIN).json });
    expect(res.status).toBe(400);
  });

  it('a credential already registered is 409', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const options = await registrationOptions(member);
    const res = await as(member, ctx.merchant.post('/v1/console/passkeys')).send({ challengeId: options.challengeId, credential: authenticator.create(options.publicKey, ORIGIN, { reuse: credential }).json });
    expect(res.status).toBe(409);
  });

  it('registration needs the session, the origin and the CSRF token', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await ctx.merchant.post('/v1/console/passkeys/registration-options').set('Origin', ORIGIN)).status).toBe(401);
    const noCsrf = await ctx.merchant.post('/v1/console/passkeys/registration-options').set('Cookie', member.cookie).set('Origin', ORIGIN);
    expect(noCsrf.status).toBe(403);
    const crossSite = await ctx.merchant.post('/v1/console/passkeys').set('Cookie', member.cookie).set('Origin', 'http://evil.test').set('X-CSRF-Token', member.csrf).send({ challengeId: 'kwc_x', credential: { id: 'a', rawId: 'a', type: 'public-key', response: { clientDataJSON: 'a', attestationObject: 'a' }, clientExtensionResults: {} } });
    expect(crossSite.status).toBe(403);
  });
});

describe('passwordless sign-in', () => {
  it('options ask for no e-mail address and are alike for everyone; the passkey signs in (a new session, audit session.sign_in)', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential, passkeyId } = await addPasskey(member, authenticator);
    const a = await signInOptions();
    const b = await signInOptions();
    expect(Object.keys(a.publicKey).sort()).toEqual(Object.keys(b.publicKey).sort());
    expect(a.publicKey).toMatchObject({ rpId: 'merchant.test', userVerification: 'required' });
    expect(a.publicKey).not.toHaveProperty('allowCredentials');
    const res = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', fromNewAddress()).send({ challengeId: a.challengeId, credential: authenticator.get(a.publicKey, ORIGIN, credential) });
    expect(res.status, res.text).toBe(200);
    const cookie = sessionCookieOf(res)!;
    expect(cookie).toMatch(/^__Host-kassa_session=kss_/);
    expect(cookie).not.toBe(member.cookie);
    expect(res.body.data).toMatchObject({ user: { userId: member.userId }, organization: { orgId: ctx.orgA.orgId }, secondFactor: { enrolled: true, restricted: false } });
    const listed = await ctx.merchant.get('/v1/console/passkeys').set('Cookie', cookie);
    expect(listed.body.data[0]).toMatchObject({ passkeyId, lastUsedAt: expect.any(String) });
  });

  it('a sign-in challenge works once: the same answer replayed is 401', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const options = await signInOptions();
    const assertion = authenticator.get(options.publicKey, ORIGIN, credential);
    const ip = fromNewAddress();
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: options.challengeId, credential: assertion })).status).toBe(200);
    const replay = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: options.challengeId, credential: assertion });
    expect(replay.status).toBe(401);
    expect(sessionCookieOf(replay)).toBeUndefined();
  });

  it('an assertion made for another origin is 401', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const options = await signInOptions();
    const res = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', fromNewAddress()).send({ challengeId: options.challengeId, credential: authenticator.get(options.publicKey, 'http://evil.test', credential) });
    expect(res.status).toBe(401);
  });

  it('a counter that did not move forwards (a cloned authenticator) is 401', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const ip = fromNewAddress();
    const first = await signInOptions();
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: first.challengeId, credential: authenticator.get(first.publicKey, ORIGIN, credential, { counter: 5 }) })).status).toBe(200);
    for (const counter of [5, 3]) {
      const options = await signInOptions();
      const res = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: options.challengeId, credential: authenticator.get(options.publicKey, ORIGIN, credential, { counter }) });
      expect(res.status, `counter ${counter}`).toBe(401);
    }
    const forwards = await signInOptions();
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: forwards.challengeId, credential: authenticator.get(forwards.publicKey, ORIGIN, credential, { counter: 6 }) })).status).toBe(200);
  });

  it('without user verification, an unknown credential, or a forged signature: 401', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const ip = fromNewAddress();
    const noUv = await signInOptions();
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: noUv.challengeId, credential: authenticator.get(noUv.publicKey, ORIGIN, credential, { userVerified: false }) })).status).toBe(401);
    const stranger = new SoftAuthenticator();
    const unknown = await signInOptions();
    const { credential: unregistered } = stranger.create({ challenge: 'x', rp: { id: 'merchant.test' }, user: { id: 'eA' } }, ORIGIN);
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: unknown.challengeId, credential: stranger.get(unknown.publicKey, ORIGIN, unregistered) })).status).toBe(401);
    const forged = await signInOptions();
    const assertion = authenticator.get(forged.publicKey, ORIGIN, credential);
    assertion.response.signature = Buffer.from('not a signature').toString('base64url');
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: forged.challengeId, credential: assertion })).status).toBe(401);
  });

  it('from another origin: 403; a malformed credential: 400', async () => {
    expect((await ctx.merchant.post('/v1/console/passkeys/sign-in-options').set('Origin', 'http://evil.test')).status).toBe(403);
    const options = await signInOptions();
    const cross = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', 'http://evil.test').send({ challengeId: options.challengeId, credential: { id: 'a', rawId: 'a', type: 'public-key', response: { clientDataJSON: 'a', authenticatorData: 'a', signature: 'a' }, clientExtensionResults: {} } });
    expect(cross.status).toBe(403);
    const malformed = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).send({ challengeId: options.challengeId, credential: { id: 'a' } });
    expect(malformed.status).toBe(400);
  });

  it('failed passkey sign-ins are throttled per client address (429 with Retry-After after 20)', async () => {
    const ip = fromNewAddress();
    for (let i = 0; i < 20; i++) {
      const res = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: `kwc_${'A'.repeat(43)}`, credential: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'AA', authenticatorData: 'AA', signature: 'AA' }, clientExtensionResults: {} } });
      expect(res.status).toBe(401);
    }
    const limited = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: `kwc_${'A'.repeat(43)}`, credential: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'AA', authenticatorData: 'AA', signature: 'AA' }, clientExtensionResults: {} } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('passkey as a second factor after a password', () => {
  it('an account with a passkey gets 202 and a challenge (no cookie), and a session once the passkey answers', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'support');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const ip = fromNewAddress();
    const first = await signIn(ctx, member.email, PASSWORD, ip);
    expect(first.status, first.text).toBe(202);
    expect(sessionCookieOf(first)).toBeUndefined();
    expect(first.headers['cache-control']).toBe('no-store');
    expect(first.body.data).toMatchObject({ secondFactorRequired: true, publicKey: { rpId: 'merchant.test', allowCredentials: [{ id: credential.id, type: 'public-key' }] } });
    const done = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: first.body.data.challengeId, credential: authenticator.get(first.body.data.publicKey, ORIGIN, credential) });
    expect(done.status, done.text).toBe(200);
    expect(sessionCookieOf(done)).toMatch(/^__Host-kassa_session=kss_/);
    expect(done.body.data).toMatchObject({ user: { userId: member.userId }, role: 'support', secondFactor: { enrolled: true } });
    // The challenge is spent.
    const again = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: first.body.data.challengeId, credential: authenticator.get(first.body.data.publicKey, ORIGIN, credential) });
    expect(again.status).toBe(401);
    // A wrong password still gets the ordinary 401, not the challenge.
    expect((await signIn(ctx, member.email, 'wrong password, surely', ip)).status).toBe(401);
  });

  it("another user's passkey cannot finish the sign-in (401)", async () => {
    const alice = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const mallory = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    await addPasskey(alice);
    const malloryAuth = new SoftAuthenticator();
    const { credential: mallorys } = await addPasskey(mallory, malloryAuth);
    const ip = fromNewAddress();
    const first = await signIn(ctx, alice.email, PASSWORD, ip);
    expect(first.status).toBe(202);
    const res = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: first.body.data.challengeId, credential: malloryAuth.get(first.body.data.publicKey, ORIGIN, mallorys) });
    expect(res.status).toBe(401);
    expect(sessionCookieOf(res)).toBeUndefined();
  });

  it('a passwordless challenge cannot finish a password sign-in, nor the reverse (401); another origin: 403; a malformed body: 400', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const authenticator = new SoftAuthenticator();
    const { credential } = await addPasskey(member, authenticator);
    const ip = fromNewAddress();
    const options = await signInOptions();
    const res = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: options.challengeId, credential: authenticator.get(options.publicKey, ORIGIN, credential) });
    expect(res.status).toBe(401);
    const first = await signIn(ctx, member.email, PASSWORD, ip);
    const reverse = await ctx.merchant.post('/v1/console/passkeys/sign-in').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send({ challengeId: first.body.data.challengeId, credential: authenticator.get(first.body.data.publicKey, ORIGIN, credential) });
    expect(reverse.status).toBe(401);
    expect((await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', 'http://evil.test').send({ challengeId: 'kwc_x', credential: { id: 'a', rawId: 'a', type: 'public-key', response: { clientDataJSON: 'a', authenticatorData: 'a', signature: 'a' }, clientExtensionResults: {} } })).status).toBe(403);
    expect((await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).send({ challengeId: 'kwc_x' })).status).toBe(400);
  });

  it('failed second factors count towards the throttle (429)', async () => {
    const ip = fromNewAddress();
    const body = { challengeId: `kwc_${'B'.repeat(43)}`, credential: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'AA', authenticatorData: 'AA', signature: 'AA' }, clientExtensionResults: {} } };
    for (let i = 0; i < 20; i++) expect((await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send(body)).status).toBe(401);
    const limited = await ctx.merchant.post('/v1/console/sign-in/second-factor').set('Origin', ORIGIN).set('X-Forwarded-For', ip).send(body);
    expect(limited.status).toBe(429);
  });
});

describe('removing passkeys', () => {
  it("a member removes their own passkey (204, audit passkey.remove); another user's, in this organization or another, is 404", async () => {
    const owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
    const member = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const outsider = await signUp(ctx, ctx.orgB.orgId, 'owner');
    const { passkeyId } = await addPasskey(member);
    expect((await as(owner, ctx.merchant.delete(`/v1/console/passkeys/${passkeyId}`))).status).toBe(404);
    expect((await as(outsider, ctx.merchant.delete(`/v1/console/passkeys/${passkeyId}`))).status).toBe(404);
    expect((await as(outsider, ctx.merchant.get('/v1/console/passkeys'))).body.data).toEqual([]);
    const removed = await as(member, ctx.merchant.delete(`/v1/console/passkeys/${passkeyId}`));
    expect(removed.status).toBe(204);
    expect((await as(member, ctx.merchant.get('/v1/console/passkeys'))).body.data).toEqual([]);
    expect((await as(member, ctx.merchant.delete(`/v1/console/passkeys/${passkeyId}`))).status).toBe(404);
    const audit = await auditActions(owner);
    expect(audit.some((e) => e.action === 'passkey.remove' && e.targetId === passkeyId)).toBe(true);
    // The password alone signs in again.
    expect((await signIn(ctx, member.email, PASSWORD, fromNewAddress())).status).toBe(200);
    // Removal needs the CSRF token.
    expect((await ctx.merchant.delete(`/v1/console/passkeys/${passkeyId}`).set('Cookie', member.cookie).set('Origin', ORIGIN)).status).toBe(403);
  });
});

describe('an organization that requires a second factor', () => {
  let org: { orgId: string };
  let owner: Member;

  beforeAll(async () => {
    const created = await ctx.admin.post('/v1/orgs').send({ name: `Second factor ${Date.now()}` });
    expect(created.status, created.text).toBe(201);
    org = { orgId: created.body.data.orgId ?? created.body.data.id };
    owner = await signUp(ctx, org.orgId, 'owner');
  });

  it('only an owner with a passkey of their own turns it on: 403 for an admin, 409 for an owner without a passkey; 403 to read for roles without members:manage', async () => {
    const admin = await signUp(ctx, org.orgId, 'admin');
    const refused = await as(admin, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error.message).toContain('Only an owner');
    const noPasskey = await as(owner, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true });
    expect(noPasskey.status).toBe(409);
    for (const role of ['developer', 'support', 'viewer'] as Role[]) {
      const member = await signUp(ctx, org.orgId, role);
      expect((await as(member, ctx.merchant.get('/v1/console/organization/security'))).status, role).toBe(403);
      expect((await as(member, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true })).status, role).toBe(403);
    }
    expect((await as(admin, ctx.merchant.get('/v1/console/organization/security'))).body.data.requireSecondFactor).toBe(false);
    expect((await as(owner, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: 'yes' })).status).toBe(400);
  });

  it('turned on: members without a passkey get restricted sessions, role by role, until they register one', async () => {
    const authenticator = new SoftAuthenticator();
    await addPasskey(owner, authenticator);
    // The owner's session was made before the passkey; it signs in again (password + passkey).
    const members = new Map<Role, Member>();
    for (const role of ['admin', 'developer', 'support', 'viewer'] as Role[]) members.set(role, await signUp(ctx, org.orgId, role));
    const on = await as(owner, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true });
    expect(on.status, on.text).toBe(200);
    expect(on.body.data.requireSecondFactor).toBe(true);
    expect(on.body.data.updatedBy).toBe(`user:${owner.userId}`);
    const without = on.body.data.membersWithoutPasskey.map((m: { userId: string }) => m.userId);
    for (const m of members.values()) expect(without).toContain(m.userId);
    expect(without).not.toContain(owner.userId);
    // The owner is not restricted.
    expect((await as(owner, ctx.merchant.get('/v1/console/members'))).status).toBe(200);

    for (const [role, member] of members) {
      const session = await as(member, ctx.merchant.get('/v1/console/session'));
      expect(session.status, role).toBe(200);
      expect(session.body.data.secondFactor, role).toEqual({ required: true, enrolled: false, restricted: true });
      // Everything else is refused, console and merchant operations alike.
      const orders = await ctx.merchant.get('/v1/orders').set('Cookie', member.cookie);
      expect(orders.status, role).toBe(403);
      expect(orders.body.error.message).toContain('requires a second factor');
      expect((await as(member, ctx.merchant.get('/v1/console/audit-log'))).status, role).toBe(403);
      // Every read of the console document but the second-factor setup is refused alike (reads no
      // role refuses, such as the catalog's and telemetry's, have this as their only 403).
      if (role === 'viewer') {
        for (const op of listOperations(await loadDocument('console'))) {
          if (op.method !== 'get' || op.operation['x-second-factor-setup'] === true || op.security.length === 0) continue;
          const url = op.path.replace(/\{[^}]+\}/g, 'X_unknown');
          const query: Record<string, string> = {};
          for (const p of (op.operation.parameters ?? []) as Array<{ in: string; name: string; required?: boolean; example?: unknown; schema?: { example?: unknown } }>) {
            if (p.in === 'query' && p.required) query[p.name] = String(p.example ?? p.schema?.example);
          }
          const res = await as(member, ctx.merchant.get(url).query(query));
          expect(res.status, `${op.operationId}: ${res.text}`).toBe(403);
        }
      }
      // A fresh password sign-in is restricted too.
      const again = await signIn(ctx, member.email, PASSWORD, fromNewAddress());
      expect(again.status, role).toBe(200);
      expect(again.body.data.secondFactor.restricted, role).toBe(true);
      // Registering a passkey is allowed, and lifts the restriction at once.
      expect((await as(member, ctx.merchant.get('/v1/console/passkeys'))).status, role).toBe(200);
      await addPasskey(member);
      expect((await ctx.merchant.get('/v1/orders').set('Cookie', member.cookie)).status, role).toBe(200);
      expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data.secondFactor, role).toEqual({ required: true, enrolled: true, restricted: false });
    }
    const state = await as(owner, ctx.merchant.get('/v1/console/organization/security'));
    const still = state.body.data.membersWithoutPasskey.map((m: { userId: string }) => m.userId);
    for (const m of members.values()) expect(still).not.toContain(m.userId);

    // With a passkey, the password alone no longer signs in: 202 and the passkey step.
    const viewer = members.get('viewer')!;
    expect((await signIn(ctx, viewer.email, PASSWORD, fromNewAddress())).status).toBe(202);

    // The last passkey stays while the organization requires a second factor.
    const ownerKeys = await as(owner, ctx.merchant.get('/v1/console/passkeys'));
    const last = await as(owner, ctx.merchant.delete(`/v1/console/passkeys/${ownerKeys.body.data[0].passkeyId}`));
    expect(last.status).toBe(409);

    // Audit: the change is recorded once; setting it again records nothing.
    expect((await as(owner, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: true })).status).toBe(200);
    const audit = (await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'))).body.data.records as Array<{ action: string; summary: string }>;
    expect(audit.filter((e) => e.action === 'organization.second_factor_requirement').map((e) => e.summary)).toEqual(['now requires a second factor (passkey) of every member']);

    // A later moment: the log lists newest first by time (the test clock is frozen otherwise).
    ctx.clock.advance(1_000);
    const off = await as(owner, ctx.merchant.put('/v1/console/organization/security')).send({ requireSecondFactor: false });
    expect(off.status).toBe(200);
    const after = (await as(owner, ctx.merchant.get('/v1/console/audit-log?size=100'))).body.data.records as Array<{ action: string; summary: string }>;
    expect(after.filter((e) => e.action === 'organization.second_factor_requirement').map((e) => e.summary)[0]).toBe('no longer requires a second factor');
    // Off: the last passkey may go.
    expect((await as(owner, ctx.merchant.delete(`/v1/console/passkeys/${ownerKeys.body.data[0].passkeyId}`))).status).toBe(204);
  });

  it("another organization's requirement does not restrict this one's sessions; its settings are its own", async () => {
    const member = await signUp(ctx, ctx.orgB.orgId, 'viewer');
    expect((await ctx.merchant.get('/v1/orders').set('Cookie', member.cookie)).status).toBe(200);
    const ownerB = await signUp(ctx, ctx.orgB.orgId, 'owner');
    const b = await as(ownerB, ctx.merchant.get('/v1/console/organization/security'));
    expect(b.status).toBe(200);
    expect(b.body.data.membersWithoutPasskey.map((m: { userId: string }) => m.userId)).not.toContain(owner.userId);
  });
});

describe('challenges are kept server-side and cleaned up', () => {
  it('only the SHA-256 of a challenge id is stored; the retention job removes challenges a day past their expiry', async () => {
    const db = ctx.testDb.database.db;
    const options = await signInOptions();
    const rows = await db('webauthn_challenges').select('id_hash', 'challenge', 'purpose');
    expect(rows.some((r: { id_hash: string }) => r.id_hash === options.challengeId)).toBe(false);
    expect(rows.some((r: { challenge: string; purpose: string }) => r.challenge === options.publicKey.challenge && r.purpose === 'sign_in')).toBe(true);
    ctx.clock.advance(24 * 3600_000 + 10 * 60_000);
    const job = ctx.services.modules.accounts.jobs().find((j) => j.name === 'account-retention')!;
    await job.run();
    const left = await db('webauthn_challenges').where({ challenge: options.publicKey.challenge }).first();
    expect(left).toBeUndefined();
  });
});
