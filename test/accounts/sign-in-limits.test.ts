/**
 * What unauthenticated sign-in requests leave behind (issue 37): failed sign-ins and lockouts in
 * the audit log of the account's organizations, without the password (item 15); the passkey
 * sign-in options' challenge rows bounded per client address and in all, and removed once expired
 * (item 14).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { PASSWORD, as, signIn, signUp, uniqueEmail, type Member } from './helpers.js';
import { THROTTLE_WINDOW_MS } from '../../src/accounts/accounts.service.js';

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

