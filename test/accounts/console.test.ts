/**
 * People, not only keys: invites, sign-in, the session cookie, expiry, rotation, revocation,
 * CSRF, throttling, roles × operations across two organizations, API keys by members, and the
 * audit log.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, PASSWORD, as, linkToken, sessionCookieOf, signIn, signUp, uniqueEmail, type Member } from './helpers.js';
import { ROLES, type Role } from '../../src/accounts/roles.js';
import { dummyHash, verifyPassword } from '../../src/accounts/passwords.js';

let ctx: TestContext;
let ownerA: Member;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  ownerA = await signUp(ctx, ctx.orgA.orgId, 'owner');
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});
// The tests move the clock by hours: the owner signs in afresh before each.
beforeEach(async () => {
  const res = await signIn(ctx, ownerA.email);
  if (res.status !== 200) throw new Error(`owner sign-in: ${res.status} ${res.text}`);
  ownerA = { ...ownerA, cookie: sessionCookieOf(res)!, csrf: res.body.data.csrfToken };
});

describe('invites and sign-in', () => {
  it('the operator invites the first owner; accepting sets a __Host- cookie (HttpOnly, SameSite=Lax, Secure, Path=/)', async () => {
    const email = uniqueEmail('first-owner');
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/invites`).send({ email, role: 'owner' });
    expect(invite.status).toBe(201);
    expect(invite.body.data.url).toMatch(/^http:\/\/merchant\.test\/console\/accept-invite#token=kinv_[A-Za-z0-9_-]{43}$/);
    const accepted = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(invite.body.data.url), password: PASSWORD, name: 'Bea' });
    expect(accepted.status).toBe(200);
    const setCookie = ([] as string[]).concat(accepted.headers['set-cookie'] as unknown as string[])[0]!;
    expect(setCookie).toMatch(/^__Host-kassa_session=kss_[A-Za-z0-9_-]{43}; Path=\/; Max-Age=43200; HttpOnly; SameSite=Lax; Secure$/);
    expect(setCookie).not.toMatch(/Domain=/i);
    expect(accepted.body.data).toMatchObject({ organization: { orgId: ctx.orgB.orgId }, role: 'owner', user: { email, name: 'Bea' } });
    // The session token is never in a body.
    expect(accepted.text).not.toContain(setCookie.split(';')[0]!.split('=')[1]!);
  });

  it('an invite works once: used again, it is 404', async () => {
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email: uniqueEmail('twice'), role: 'viewer' });
    const token = linkToken(invite.body.data.url);
    expect((await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token, password: PASSWORD })).status).toBe(200);
    const again = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token, password: PASSWORD });
    expect(again.status).toBe(404);
    expect(again.body.error.code).toBe('NOT_FOUND');
  });

  it('an invite past its 7 days is 404', async () => {
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email: uniqueEmail('late'), role: 'viewer' });
    ctx.clock.advance(7 * 24 * 3600_000 + 1);
    const late = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(invite.body.data.url), password: PASSWORD });
    expect(late.status).toBe(404);
  });

  it('a revoked invite is 404', async () => {
    const created = await as(ownerA, ctx.merchant.post('/v1/console/invites')).send({ email: uniqueEmail('revoked'), role: 'support' });
    expect(created.status).toBe(201);
    const revoked = await as(ownerA, ctx.merchant.post(`/v1/console/invites/${created.body.data.inviteId}/revoke`));
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.status).toBe('REVOKED');
    // Without outgoing e-mail the member never sees the link (issue 37): the answer says so, and only the operator prints one.
    expect(created.body.data.emailed).toBe(false);
    expect(created.text).not.toContain('kinv_');
    expect(created.body.message).toContain(`user invite-link --org ${ctx.orgA.orgId} --invite ${created.body.data.inviteId}`);
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites/${created.body.data.inviteId}/link`)).status).toBe(404);
    const listed = await as(ownerA, ctx.merchant.get('/v1/console/invites'));
    expect(listed.body.data.find((i: { inviteId: string }) => i.inviteId === created.body.data.inviteId).status).toBe('REVOKED');
  });

  it('a new account needs a password of 12 characters or more', async () => {
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email: uniqueEmail('short'), role: 'viewer' });
    const res = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(invite.body.data.url), password: 'short' });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('at least 12 characters');
  });

  it('an existing account joins a second organization signed in as itself (never by its password at acceptance), and can switch to it', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const invite = await ctx.admin.post(`/v1/orgs/${ctx.orgB.orgId}/invites`).send({ email: member.email, role: 'developer' });
    const notSignedIn = await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(invite.body.data.url), password: PASSWORD });
    expect(notSignedIn.status).toBe(401);
    const signedIn = await signIn(ctx, member.email);
    const self = { cookie: sessionCookieOf(signedIn)!, csrf: signedIn.body.data.csrfToken };
    const joined = await as(self, ctx.merchant.post('/v1/console/invites/accept')).send({ token: linkToken(invite.body.data.url) });
    expect(joined.status, joined.text).toBe(200);
    expect(joined.body.data.memberships).toHaveLength(2);
    expect(joined.body.data).toMatchObject({ organization: { orgId: ctx.orgB.orgId }, role: 'developer', strength: 'password' });
    // Accepting moved that session: its old cookie is dead.
    expect((await as(self, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    const switched = await as(member, ctx.merchant.put('/v1/console/session/organization')).send({ orgId: ctx.orgB.orgId });
    expect(switched.status).toBe(200);
    expect(switched.body.data).toMatchObject({ organization: { orgId: ctx.orgB.orgId }, role: 'developer' });
    // The switch replaced the session: the old cookie is dead.
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
  });

  it('a wrong password and an unknown e-mail address get the same answer', async () => {
    const wrong = await signIn(ctx, ownerA.email, 'wrong password, long enough', '198.51.100.1');
    const unknown = await signIn(ctx, uniqueEmail('nobody'), 'wrong password, long enough', '198.51.100.1');
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual(wrong.body);
  });

  it('an unknown e-mail address costs the same password-hash work as a known one (no enumeration by timing)', async () => {
    // This process's CPU time (every thread: argon2 runs on libuv's pool), not the wall clock: a
    // loaded machine stretches wall time at random and failed this test in CI; the work stays.
    const time = async (run: () => Promise<unknown>) => {
      const started = process.cpuUsage();
      await run();
      const used = process.cpuUsage(started);
      return (used.user + used.system) / 1000;
    };
    const dummy = await dummyHash();
    await time(() => signIn(ctx, uniqueEmail('warm-up'), 'wrong password, long enough', '198.51.100.19'));
    const unknown: number[] = [];
    const hashOnly: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      unknown.push(await time(() => signIn(ctx, uniqueEmail('ghost'), 'wrong password, long enough', `198.51.100.${Math.floor(Math.random() * 200) + 20}`)));
      hashOnly.push(await time(() => verifyPassword(dummy, 'wrong password, long enough')));
    }
    // The answer to an unknown address includes one argon2id verification: never less work than a
    // bare verification. The least of each tells a skipped hash (~2 ms) from a verified one. A known account's failure also writes its organizations' audit
    // entries: a few ms more, bounded by the account throttle (5 guesses per 15 minutes).
    expect(Math.min(...unknown)).toBeGreaterThan(Math.min(...hashOnly) * 0.9);
  });

  it('signs in with the password; every sign-in is a new session', async () => {
    const first = await signIn(ctx, ownerA.email);
    const second = await signIn(ctx, ownerA.email);
    expect(first.status).toBe(200);
    expect(sessionCookieOf(first)).not.toBe(sessionCookieOf(second));
    expect(first.body.data.csrfToken).not.toBe(second.body.data.csrfToken);
  });
});

describe('one-time sign-in links (first run in development)', () => {
  it('signs the demo owner in once; used again or after 15 minutes it is 404', async () => {
    const accounts = ctx.services.modules.accounts.accounts;
    const { user } = await accounts.ensureMember(ctx.orgB.orgId, uniqueEmail('demo-owner'), 'owner');
    const first = await accounts.createSignInLink(ctx.orgB.orgId, user.id);
    const token = linkToken(first.url);
    const redeemed = await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token });
    expect(redeemed.status).toBe(200);
    expect(redeemed.body.data).toMatchObject({ role: 'owner', organization: { orgId: ctx.orgB.orgId } });
    expect(sessionCookieOf(redeemed)).toBeDefined();
    expect((await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token })).status).toBe(404);
    const late = await accounts.createSignInLink(ctx.orgB.orgId, user.id);
    ctx.clock.advance(15 * 60_000);
    expect((await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token: linkToken(late.url) })).status).toBe(404);
    // A link of another kind is not a sign-in link.
    expect((await ctx.merchant.post('/v1/console/sign-in-links/redeem').set('Origin', ORIGIN).send({ token: token.replace('ksil_', 'kinv_') })).status).toBe(404);
  });
});

describe('throttling', () => {
  it('after 5 failures for an account, even the right password is 429 until the window ends', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    for (let i = 0; i < 5; i += 1) expect((await signIn(ctx, member.email, 'wrong password, long enough', `203.0.113.${i + 1}`)).status).toBe(401);
    const blocked = await signIn(ctx, member.email, PASSWORD, '203.0.113.99');
    expect(blocked.status).toBe(429);
    expect(blocked.body.error.code).toBe('RATE_LIMITED');
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    // Unknown addresses are throttled alike (nothing to learn from the 429 either).
    const ghost = uniqueEmail('ghost');
    for (let i = 0; i < 5; i += 1) await signIn(ctx, ghost, 'wrong password, long enough', `203.0.113.${i + 1}`);
    expect((await signIn(ctx, ghost, 'wrong password, long enough', '203.0.113.99')).status).toBe(429);
    ctx.clock.advance(15 * 60_000 + 1);
    expect((await signIn(ctx, member.email, PASSWORD, '203.0.113.99')).status).toBe(200);
  });

  it('after 20 failures from one address, every sign-in from it is 429; other addresses are not affected', async () => {
    for (let i = 0; i < 20; i += 1) await signIn(ctx, uniqueEmail('spray'), 'wrong password, long enough', '192.0.2.77');
    expect((await signIn(ctx, ownerA.email, PASSWORD, '192.0.2.77')).status).toBe(429);
    expect((await signIn(ctx, ownerA.email, PASSWORD, '192.0.2.78')).status).toBe(200);
    ctx.clock.advance(15 * 60_000 + 1);
  });
});

describe('session lifetime', () => {
  it('ends 2 hours after the last request (idle expiry)', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    ctx.clock.advance(2 * 3600_000 - 60_000);
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
    ctx.clock.advance(2 * 3600_000 - 60_000);
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
    ctx.clock.advance(2 * 3600_000);
    const expired = await as(member, ctx.merchant.get('/v1/console/session'));
    expect(expired.status).toBe(200);
    expect(expired.body.data).toEqual({ signedIn: false });
    const refused = await as(member, ctx.merchant.get('/v1/console/members'));
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('UNAUTHORIZED');
  });

  it('being signed out is an answer, not an error: GET /v1/console/session is 200 { signedIn: false } (issue 37, item 24)', async () => {
    const none = await ctx.merchant.get('/v1/console/session');
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ success: true, message: 'Signed out', data: { signedIn: false } });
    expect(none.headers['set-cookie']).toBeUndefined();
    expect(none.headers['cache-control']).toBe('no-store');
    // A cookie naming no live session: the same answer, and the stale cookie is cleared.
    const stale = await ctx.merchant.get('/v1/console/session').set('Cookie', '__Host-kassa_session=kss_not_a_session_at_all');
    expect(stale.status).toBe(200);
    expect(stale.body.data).toEqual({ signedIn: false });
    expect(String(stale.headers['set-cookie'])).toMatch(/^__Host-kassa_session=; Path=\/; Max-Age=0/);
    // Every other operation still needs the session.
    expect((await ctx.merchant.get('/v1/console/members')).status).toBe(401);
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const signedIn = await as(member, ctx.merchant.get('/v1/console/session'));
    expect(signedIn.body.data).toMatchObject({ user: { email: member.email }, role: 'viewer' });
    expect(signedIn.body.data.signedIn).toBeUndefined();
  });

  it('ends 12 hours after sign-in whatever happens (absolute expiry)', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    for (let hour = 1; hour < 12; hour += 1) {
      ctx.clock.advance(3600_000);
      expect((await as(member, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
    }
    ctx.clock.advance(3600_000);
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
  });

  it('sign-out ends this session; sign out everywhere ends all of them', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const other = await signIn(ctx, member.email);
    const otherMember = { cookie: sessionCookieOf(other)!, csrf: other.body.data.csrfToken };
    const third = await signIn(ctx, member.email);
    const thirdMember = { cookie: sessionCookieOf(third)!, csrf: third.body.data.csrfToken };
    const out = await as(member, ctx.merchant.post('/v1/console/sign-out'));
    expect(out.status).toBe(204);
    expect(String(out.headers['set-cookie'])).toContain('Max-Age=0');
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    expect((await as(otherMember, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
    expect((await as(otherMember, ctx.merchant.post('/v1/console/sign-out-everywhere'))).status).toBe(204);
    expect((await as(otherMember, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    expect((await as(thirdMember, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
  });

  it('a role change applies at once and rotates the member’s session on their next request', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await as(member, ctx.merchant.get('/v1/console/api-keys'))).status).toBe(403);
    ctx.clock.advance(1000);
    const changed = await as(ownerA, ctx.merchant.patch(`/v1/console/members/${member.userId}`)).send({ role: 'developer' });
    expect(changed.status).toBe(200);
    expect(changed.body.data.role).toBe('developer');
    const next = await as(member, ctx.merchant.get('/v1/console/api-keys'));
    expect(next.status).toBe(200);
    const rotated = sessionCookieOf(next);
    expect(rotated).toBeDefined();
    expect(rotated).not.toBe(member.cookie);
    // The old cookie is dead; the new one works, with its own CSRF token.
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    const fresh = await ctx.merchant.get('/v1/console/session').set('Cookie', rotated!);
    expect(fresh.status).toBe(200);
    expect(fresh.body.data.role).toBe('developer');
    expect(fresh.body.data.csrfToken).not.toBe(member.csrf);
  });

  it('removing a member revokes their sessions at once', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'support');
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
    expect((await as(ownerA, ctx.merchant.delete(`/v1/console/members/${member.userId}`))).status).toBe(200);
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    expect((await as(member, ctx.merchant.get('/v1/orders'))).status).toBe(401);
  });

  it('a password reset link (from the operator) sets the password once and signs out everywhere', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const link = await ctx.admin.post('/v1/users/password-reset').send({ email: member.email });
    expect(link.status).toBe(201);
    expect(link.body.data.url).toMatch(/\/console\/reset-password#token=krst_/);
    const token = linkToken(link.body.data.url);
    const done = await ctx.merchant.post('/v1/console/password-resets/complete').set('Origin', ORIGIN).send({ token, password: 'a brand new password' });
    expect(done.status).toBe(204);
    expect((await as(member, ctx.merchant.get('/v1/console/session'))).body.data).toEqual({ signedIn: false });
    expect((await signIn(ctx, member.email)).status).toBe(401);
    expect((await signIn(ctx, member.email, 'a brand new password')).status).toBe(200);
    const again = await ctx.merchant.post('/v1/console/password-resets/complete').set('Origin', ORIGIN).send({ token, password: 'yet another password' });
    expect(again.status).toBe(404);
    expect((await ctx.admin.post('/v1/users/password-reset').send({ email: uniqueEmail('nobody') })).status).toBe(404);
  });
});

describe('CSRF', () => {
  it('refuses a state-changing session request without X-CSRF-Token, or with another session’s', async () => {
    const noToken = await ctx.merchant.post('/v1/console/invites').set('Cookie', ownerA.cookie).set('Origin', ORIGIN).send({ email: uniqueEmail('csrf'), role: 'viewer' });
    expect(noToken.status).toBe(403);
    expect(noToken.body.error.message).toContain('X-CSRF-Token');
    const other = await signIn(ctx, ownerA.email);
    const wrongToken = await ctx.merchant
      .post('/v1/console/invites')
      .set('Cookie', ownerA.cookie)
      .set('Origin', ORIGIN)
      .set('X-CSRF-Token', other.body.data.csrfToken)
      .send({ email: uniqueEmail('csrf'), role: 'viewer' });
    expect(wrongToken.status).toBe(403);
  });

  it('refuses a cross-site form post (the browser sends the cookie, another Origin, a form body)', async () => {
    const res = await ctx.merchant
      .post('/v1/console/invites')
      .set('Cookie', ownerA.cookie)
      .set('Origin', 'https://evil.example')
      .set('Sec-Fetch-Site', 'cross-site')
      .type('form')
      .send({ email: 'attacker@evil.example', role: 'owner' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    const invites = await as(ownerA, ctx.merchant.get('/v1/console/invites'));
    expect(invites.body.data.some((i: { email: string }) => i.email === 'attacker@evil.example')).toBe(false);
  });

  it('refuses a cross-origin fetch even when it carries the CSRF token', async () => {
    const res = await ctx.merchant
      .post('/v1/console/invites')
      .set('Cookie', ownerA.cookie)
      .set('Origin', 'https://evil.example')
      .set('X-CSRF-Token', ownerA.csrf)
      .send({ email: uniqueEmail('fetch'), role: 'viewer' });
    expect(res.status).toBe(403);
    const noOrigin = await ctx.merchant
      .post('/v1/console/invites')
      .set('Cookie', ownerA.cookie)
      .set('Sec-Fetch-Site', 'same-site')
      .set('X-CSRF-Token', ownerA.csrf)
      .send({ email: uniqueEmail('fetch'), role: 'viewer' });
    expect(noOrigin.status).toBe(403);
  });

  it('merchant operations called with the session get the same checks', async () => {
    const res = await ctx.merchant.delete('/v1/webhook/WHE_000000000000000000000000').set('Cookie', ownerA.cookie).set('Origin', ORIGIN);
    expect(res.status).toBe(403);
    const ok = await as(ownerA, ctx.merchant.delete('/v1/webhook/WHE_000000000000000000000000'));
    expect(ok.status).toBe(404);
  });

  it('sign-in from another origin is refused (login CSRF)', async () => {
    const res = await ctx.merchant.post('/v1/console/sign-in').set('Origin', 'https://evil.example').send({ email: ownerA.email, password: PASSWORD });
    expect(res.status).toBe(403);
  });

  it('reads need no token', async () => {
    expect((await ctx.merchant.get('/v1/console/session').set('Cookie', ownerA.cookie)).status).toBe(200);
  });
});

describe('roles × operations', () => {
  type OperationClass = 'read' | 'checkout' | 'webhooks' | 'apiKeys' | 'members' | 'audit';
  const allowed: Record<Role, OperationClass[]> = {
    owner: ['read', 'checkout', 'webhooks', 'apiKeys', 'members', 'audit'],
    admin: ['read', 'checkout', 'webhooks', 'apiKeys', 'members', 'audit'],
    developer: ['read', 'checkout', 'webhooks', 'apiKeys'],
    support: ['read'],
    viewer: ['read'],
  };
  const calls: Record<OperationClass, (m: Member) => import('supertest').Test> = {
    read: (m) => as(m, ctx.merchant.get('/v1/orders')),
    checkout: (m) => as(m, ctx.merchant.post('/v1/checkout-sessions/CS_000000000000000000000000/expire')),
    webhooks: (m) => as(m, ctx.merchant.delete('/v1/webhook/WHE_000000000000000000000000')),
    apiKeys: (m) => as(m, ctx.merchant.get('/v1/console/api-keys')),
    members: (m) => as(m, ctx.merchant.get('/v1/console/members')),
    audit: (m) => as(m, ctx.merchant.get('/v1/console/audit-log')),
  };
  const members = new Map<Role, Member>();
  beforeAll(async () => {
    for (const role of ROLES) members.set(role, await signUp(ctx, ctx.orgA.orgId, role));
  }, 180_000);

  for (const role of ROLES) {
    for (const operation of Object.keys(calls) as OperationClass[]) {
      const expected = allowed[role].includes(operation);
      it(`${role} ${expected ? 'may' : 'may not'} ${operation}`, async () => {
        const res = await calls[operation](members.get(role)!);
        if (expected) expect([200, 404]).toContain(res.status);
        else {
          expect(res.status).toBe(403);
          expect(res.body.error.message).toContain(`"${role}"`);
        }
      });
    }
  }

  it('a member of A never reaches B: B’s key, B as organization and B’s members are 404', async () => {
    const admin = members.get('admin')!;
    const revoke = await as(admin, ctx.merchant.post(`/v1/console/api-keys/${ctx.orgB.apiKeyId}/revoke`));
    expect(revoke.status).toBe(404);
    expect((await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgB.apiKey)).status).toBe(200);
    expect((await as(admin, ctx.merchant.put('/v1/console/session/organization')).send({ orgId: ctx.orgB.orgId })).status).toBe(404);
    const ownerB = await signUp(ctx, ctx.orgB.orgId, 'owner');
    expect((await as(admin, ctx.merchant.patch(`/v1/console/members/${ownerB.userId}`)).send({ role: 'viewer' })).status).toBe(404);
    expect((await as(admin, ctx.merchant.delete(`/v1/console/members/${ownerB.userId}`))).status).toBe(404);
    const listed = await as(admin, ctx.merchant.get('/v1/console/members'));
    expect(listed.body.data.some((m: { userId: string }) => m.userId === ownerB.userId)).toBe(false);
  });

  it('an admin neither makes nor removes owners; the last owner stays', async () => {
    const admin = members.get('admin')!;
    const viewer = members.get('viewer')!;
    expect((await as(admin, ctx.merchant.patch(`/v1/console/members/${viewer.userId}`)).send({ role: 'owner' })).status).toBe(403);
    expect((await as(admin, ctx.merchant.delete(`/v1/console/members/${ownerA.userId}`))).status).toBe(403);
    expect((await as(admin, ctx.merchant.post('/v1/console/invites')).send({ email: uniqueEmail('o'), role: 'owner' })).status).toBe(403);
    const soloOwner = await signUp(ctx, ctx.orgB.orgId, 'admin');
    void soloOwner;
    // Org A has several owners by now: demote all but one, then the last is refused.
    const owners = (await as(ownerA, ctx.merchant.get('/v1/console/members'))).body.data.filter((m: { role: string; userId: string }) => m.role === 'owner' && m.userId !== ownerA.userId);
    for (const o of owners) expect((await as(ownerA, ctx.merchant.patch(`/v1/console/members/${o.userId}`)).send({ role: 'admin' })).status).toBe(200);
    const last = await as(ownerA, ctx.merchant.patch(`/v1/console/members/${ownerA.userId}`)).send({ role: 'admin' });
    expect(last.status).toBe(409);
    expect((await as(ownerA, ctx.merchant.delete(`/v1/console/members/${ownerA.userId}`))).status).toBe(409);
  });
});

describe('API keys by members', () => {
  it('creates a key (shown once), lists it with its creator and last use, revokes it', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const created = await as(dev, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'backend', permissions: ['orders:read'] });
    expect(created.status).toBe(201);
    expect(created.body.data.key).toMatch(/^ak_/);
    expect(created.body.data.createdBy).toBe(`user:${dev.userId}`);
    expect((await ctx.merchant.get('/v1/orders').set('X-API-Key', created.body.data.key)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const listed = await as(dev, ctx.merchant.get('/v1/console/api-keys'));
    const row = listed.body.data.find((k: { apiKeyId: string }) => k.apiKeyId === created.body.data.apiKeyId);
    expect(row).toMatchObject({ name: 'backend', permissions: ['orders:read'], revoked: false });
    expect(row.key).toBeUndefined();
    expect(row.lastUsedAt).toBe(ctx.clock.now().toISOString());
    const revoked = await as(dev, ctx.merchant.post(`/v1/console/api-keys/${created.body.data.apiKeyId}/revoke`));
    expect(revoked.body.data.revoked).toBe(true);
    expect((await ctx.merchant.get('/v1/orders').set('X-API-Key', created.body.data.key)).status).toBe(401);
  });

  it('a key created without permissions gets exactly the key permissions of the creator’s role', async () => {
    const dev = await signUp(ctx, ctx.orgA.orgId, 'developer');
    const created = await as(dev, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'default' });
    expect(created.body.data.permissions.sort()).toEqual(['catalog:read', 'checkout:write', 'customers:read', 'customers:write', 'entitlements:read', 'meters:read', 'meters:write', 'orders:read', 'subscriptions:read', 'usage:write', 'webhooks:write', 'x402:settle'].sort());
  });
});

describe('audit log', () => {
  it('records members’ actions, API-key actions and operator actions, readable by owners', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await as(ownerA, ctx.merchant.patch(`/v1/console/members/${member.userId}`)).send({ role: 'developer' })).status).toBe(200);
    expect((await as(ownerA, ctx.merchant.post('/v1/console/api-keys')).send({ name: 'audited' })).status).toBe(201);
    const webhookDelete = await ctx.merchant.delete('/v1/webhook/WHE_000000000000000000000000').set('X-API-Key', ctx.orgA.apiKey);
    expect(webhookDelete.status).toBe(404);
    const product = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/products`).send({ name: 'Audited' });
    expect(product.status).toBe(201);
    const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
    expect(log.status).toBe(200);
    const actions = log.body.data.records.map((r: { action: string; actorType: string }) => `${r.actorType}:${r.action}`);
    expect(actions).toContain('operator:invite.create');
    expect(actions).toContain('user:member.join');
    expect(actions).toContain('user:member.role_change');
    expect(actions).toContain('user:api_key.create');
    expect(actions).toContain('operator:createProduct');
    expect(actions).toContain('user:session.sign_in');
    // A refused request (404) is not an action.
    expect(actions).not.toContain('api_key:deleteWebhookEndpoint');
    const entry = log.body.data.records.find((r: { action: string }) => r.action === 'createProduct');
    expect(entry, JSON.stringify(entry)).toMatchObject({ actorId: null, targetType: 'orgs', targetId: ctx.orgA.orgId, summary: 'POST /v1/orgs/{id}/products (fields: name, status)' });
    // Another organization's log holds none of it.
    const ownerB = await signUp(ctx, ctx.orgB.orgId, 'owner');
    const logB = await as(ownerB, ctx.merchant.get('/v1/console/audit-log?size=100'));
    expect(logB.body.data.records.every((r: { action: string }) => r.action !== 'createProduct')).toBe(true);
  });

  it('records a merchant state change made with an API key, with the key as actor', async () => {
    const put = await ctx.merchant.delete('/v1/x402/paywalls/PRC_000000000000000000000000').set('X-API-Key', ctx.orgA.apiKey);
    const log = await as(ownerA, ctx.merchant.get('/v1/console/audit-log?size=100'));
    if (put.status < 300) expect(log.body.data.records.some((r: { actorType: string; actorId: string }) => r.actorType === 'api_key' && r.actorId === ctx.orgA.apiKeyId)).toBe(true);
  });

  it('keeps entries 400 days: the retention job removes older ones (and ended sessions), nothing younger', async () => {
    const db = ctx.testDb.database.db;
    const old = new Date(ctx.clock.now().getTime() - 420 * 24 * 3600_000);
    await db('audit_log').insert({ id: 'AUD_retention00000000000000', org_id: ctx.orgA.orgId, actor_type: 'operator', action: 'test', summary: 'old', created_at: old });
    const before = Number((await db('audit_log').count<{ count: number }[]>({ count: '*' }))[0]!.count);
    const job = (await import('../../src/jobs.js')).workerJobs(ctx.deps).find((j) => j.name === 'account-retention')!;
    expect(await job.run()).toBe(true);
    expect(await db('audit_log').where({ id: 'AUD_retention00000000000000' }).first()).toBeUndefined();
    expect(Number((await db('audit_log').count<{ count: number }[]>({ count: '*' }))[0]!.count)).toBe(before - 1);
    // Sessions ended more than a day ago are gone; live ones stay.
    expect(Number((await db('console_sessions').whereNull('revoked_at').where('expires_at', '>', ctx.clock.now()).count<{ count: number }[]>({ count: '*' }))[0]!.count)).toBeGreaterThan(0);
    expect((await as(ownerA, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
  });

  it('is append-only: rows cannot be changed or deleted', async () => {
    const db = ctx.testDb.database.db;
    await expect(db.raw("UPDATE audit_log SET summary = 'rewritten'")).rejects.toThrow(/append-only/);
    await expect(db.raw('DELETE FROM audit_log')).rejects.toThrow(/append-only/);
  });
});

describe('every console operation, refused', () => {
  it('every state-changing session operation refuses a request without X-CSRF-Token (403), before doing anything', async () => {
    const { contractOperations } = await import('../fuzz/operations.js');
    const ops = (await contractOperations()).filter((op) => op.document === 'console' && op.method !== 'get' && op.security.some((r) => 'ConsoleSession' in r));
    expect(ops.length).toBeGreaterThan(8);
    for (const op of ops) {
      const path = op.path.replace('{id}', 'ZZZ_000000000000000000000000');
      const res = await ctx.merchant[op.method as 'post'](path).set('Cookie', ownerA.cookie).set('Origin', ORIGIN).send({});
      expect(res.status, `${op.operationId} ${res.text}`).toBe(403);
      expect(res.body.error.message).toContain('X-CSRF-Token');
    }
    // Nothing was done: the session still works.
    expect((await as(ownerA, ctx.merchant.get('/v1/console/session'))).status).toBe(200);
  });

  it('every operation that starts a session refuses another origin (403)', async () => {
    for (const [path, body] of [
      ['/v1/console/sign-in', { email: ownerA.email, password: PASSWORD }],
      ['/v1/console/invites/accept', { token: 'kinv_x', password: PASSWORD }],
      ['/v1/console/password-resets/complete', { token: 'krst_x', password: PASSWORD }],
      ['/v1/console/sign-in-links/redeem', { token: 'ksil_x' }],
    ] as const) {
      const res = await ctx.merchant.post(path).set('Origin', 'https://evil.example').send(body);
      expect(res.status, path).toBe(403);
    }
  });

  it('a viewer cannot list invites (403)', async () => {
    const viewer = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await as(viewer, ctx.merchant.get('/v1/console/invites'))).status).toBe(403);
  });

  it('inviting a member again is 409, by the console and by the operator; an invite that became moot is 409 when accepted', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await as(ownerA, ctx.merchant.post('/v1/console/invites')).send({ email: member.email, role: 'support' })).status).toBe(409);
    expect((await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email: member.email.toUpperCase(), role: 'support' })).status).toBe(409);
    const email = uniqueEmail('twice-invited');
    const first = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email, role: 'viewer' });
    const second = await ctx.admin.post(`/v1/orgs/${ctx.orgA.orgId}/invites`).send({ email, role: 'support' });
    expect((await ctx.merchant.post('/v1/console/invites/accept').set('Origin', ORIGIN).send({ token: linkToken(first.body.data.url), password: PASSWORD })).status).toBe(200);
    const signedIn = await signIn(ctx, email);
    const moot = await as({ cookie: sessionCookieOf(signedIn)!, csrf: signedIn.body.data.csrfToken }, ctx.merchant.post('/v1/console/invites/accept')).send({ token: linkToken(second.body.data.url) });
    expect(moot.status).toBe(409);
  });
});
