/**
 * What unauthenticated sign-in requests leave behind (issue 37): failed sign-ins and lockouts in
 * the audit log of the account's organizations, without the password (item 15); the passkey
 * sign-in options' challenge rows bounded per client address and in all, and removed once expired
 * (item 14).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { ORIGIN, PASSWORD, as, signIn, signUp, uniqueEmail, type Member } from './helpers.js';
import { PASSKEY_OPTIONS_ADDRESS_LIMIT, PASSKEY_OPTIONS_GLOBAL_LIMIT, THROTTLE_WINDOW_MS } from '../../src/accounts/accounts.service.js';
import { accountRetentionJob } from '../../src/accounts/accounts.jobs.js';
import { KnexAccountRepository } from '../../src/accounts/accounts.repository.js';
import { CHALLENGE_TTL_MS } from '../../src/accounts/passkeys.service.js';

let ctx: TestContext;
let owner: Member;

beforeAll(async () => {
  ctx = await createTestContext({ env: { TRUST_PROXY: '1' } });
  owner = await signUp(ctx, ctx.orgA.orgId, 'owner');
}, 180_000);
afterAll(async () => {
  await ctx?.close();
});

const auditOf = async (member: Member) => {
  const fresh = await signIn(ctx, member.email, PASSWORD, '192.0.2.200');
  expect(fresh.status, fresh.text).toBe(200);
  const cookie = ([] as string[]).concat(fresh.headers['set-cookie'] as unknown as string[]).find((c) => c.startsWith('__Host-kassa_session='))!.split(';')[0]!;
  const log = await as({ cookie, csrf: fresh.body.data.csrfToken }, ctx.merchant.get('/v1/console/audit-log?size=100'));
  expect(log.status).toBe(200);
  return log.body.data.records as Array<{ action: string; actorType: string; targetId: string | null; summary: string; clientAddress: string | null }>;
};

describe('failed sign-ins in the audit log', () => {
  it('each wrong password of a member is recorded in their organization, the fifth with the lockout; never the password', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    const secret = 'wrong but secret password 7';
    for (let i = 0; i < 5; i += 1) expect((await signIn(ctx, member.email, secret, `203.0.113.${40 + i}`)).status).toBe(401);
    expect((await signIn(ctx, member.email, PASSWORD, '203.0.113.60')).status).toBe(429);
    const records = await auditOf(owner);
    const failed = records.filter((r) => r.action === 'session.sign_in_failed' && r.targetId === member.userId);
    expect(failed).toHaveLength(5);
    expect(failed.map((r) => r.clientAddress).sort()).toEqual(['203.0.113.40', '203.0.113.41', '203.0.113.42', '203.0.113.43', '203.0.113.44']);
    expect(failed[0]).toMatchObject({ actorType: 'system', summary: expect.stringContaining('failed password sign-in') });
    const locked = records.filter((r) => r.action === 'account.locked' && r.targetId === member.userId);
    expect(locked).toHaveLength(1);
    expect(locked[0]!.summary).toMatch(/locked for 15 minutes after 5 failed attempts/);
    // The refused sixth attempt (429) adds nothing: the log cannot be flooded through the throttle.
    expect(JSON.stringify(records)).not.toContain(secret);
    // Another organization sees nothing of it.
    const other = await signUp(ctx, ctx.orgB.orgId, 'owner');
    expect((await auditOf(other)).filter((r) => r.targetId === member.userId)).toEqual([]);
    ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
  });

  it('an unknown address is throttled but recorded nowhere (it belongs to no organization)', async () => {
    const ghost = uniqueEmail('ghost');
    for (let i = 0; i < 3; i += 1) expect((await signIn(ctx, ghost, 'wrong password, long enough', `203.0.113.${80 + i}`)).status).toBe(401);
    expect(JSON.stringify(await auditOf(owner))).not.toContain(ghost);
  });

  it('a right password after a wrong one signs in and does not count against the client address', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer');
    expect((await signIn(ctx, member.email, 'wrong password, long enough', '198.51.100.7')).status).toBe(401);
    for (let i = 0; i < 25; i += 1) expect((await signIn(ctx, member.email, PASSWORD, '198.51.100.7')).status).toBe(200);
  });
});


describe('passkey sign-in options (item 14)', () => {
  const options = (address: string) => ctx.merchant.post('/v1/console/passkeys/sign-in-options').set('Origin', ORIGIN).set('X-Forwarded-For', address).send();
  const challenges = async () => Number((await ctx.testDb.database.db('webauthn_challenges').count<{ count: number }[]>({ count: '*' }).first())?.count ?? 0);

  it(`at most ${PASSKEY_OPTIONS_ADDRESS_LIMIT} per client address in 15 minutes (then 429 with Retry-After, and no row); other addresses go on`, async () => {
    const before = await challenges();
    for (let i = 0; i < PASSKEY_OPTIONS_ADDRESS_LIMIT; i += 1) expect((await options('203.0.113.150')).status).toBe(200);
    const refused = await options('203.0.113.150');
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('RATE_LIMITED');
    expect(refused.body.error.message).toContain('passkey sign-in requests');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(await challenges()).toBe(before + PASSKEY_OPTIONS_ADDRESS_LIMIT);
    expect((await options('203.0.113.151')).status).toBe(200);
    ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
    expect((await options('203.0.113.150')).status).toBe(200);
  });

  it(`at most ${PASSKEY_OPTIONS_GLOBAL_LIMIT} in all in 15 minutes, whatever the addresses`, async () => {
    ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
    expect((await options('198.51.100.1')).status).toBe(200);
    // The global budget spent by many addresses (written directly: 3000 requests are not the point).
    await ctx.testDb.database.db('sign_in_failures').where({ throttle_key: 'passkey_options:all' }).update({ failures: PASSKEY_OPTIONS_GLOBAL_LIMIT });
    expect((await options('198.51.100.2')).status).toBe(429);
    ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
    expect((await options('198.51.100.2')).status).toBe(200);
  });

  it('a spent challenge is deleted at once; unspent ones are removed by the retention job once expired', async () => {
    const spent = await options('192.0.2.160');
    const passkeys = ctx.services.modules.accounts.passkeys;
    const before = await challenges();
    expect(await passkeys.consume(spent.body.data.challengeId, 'sign_in')).toBeDefined();
    expect(await challenges()).toBe(before - 1);
    expect(await passkeys.consume(spent.body.data.challengeId, 'sign_in')).toBeUndefined();
    expect(await challenges()).toBeGreaterThan(0);
    const job = accountRetentionJob(new KnexAccountRepository(ctx.testDb.database.db), ctx.clock, passkeys);
    await job.run();
    expect(await challenges()).toBeGreaterThan(0);
    ctx.clock.advance(CHALLENGE_TTL_MS + 1);
    await job.run();
    expect(await challenges()).toBe(0);
  });
});
