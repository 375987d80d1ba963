/**
 * The last two owners of an organization demoting or removing each other at the same moment,
 * on PostgreSQL (real concurrent transactions; PGlite has one connection): whatever the
 * interleaving, the organization keeps an owner, and exactly one of the two changes wins (the
 * other is `409`). 60 rounds of each pairing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { AppError } from '../../src/kernel/errors.js';
import type { AccountService } from '../../src/accounts/accounts.service.js';

const ROUNDS = 60;
let ctx: TestContext;
let accounts: AccountService;
let n = 0;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('the last two owners removing each other at once', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    accounts = ctx.services.modules.accounts.accounts;
  }, 180_000);
  afterAll(async () => {
    await ctx?.close();
  });

  async function twoOwners() {
    const created = await ctx.admin.post('/v1/orgs').send({ name: `Race ${++n}` });
    expect(created.status, created.text).toBe(201);
    const orgId = created.body.data.orgId as string;
    const a = await accounts.ensureMember(orgId, `race-a-${n}-${Date.now()}@example.com`, 'owner');
    const b = await accounts.ensureMember(orgId, `race-b-${n}-${Date.now()}@example.com`, 'owner');
    const as = (userId: string) => ({ orgId, role: 'owner' as const, actor: { type: 'user' as const, id: userId } });
    return { orgId, a: a.user.id, b: b.user.id, as };
  }

  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (error: unknown) => (error instanceof AppError ? error.code : `unexpected: ${String(error)}`),
    );

  const pairings = {
    'demote / demote': (r: Awaited<ReturnType<typeof twoOwners>>) => [accounts.changeRole(r.as(r.a), r.b, 'admin', null), accounts.changeRole(r.as(r.b), r.a, 'viewer', null)],
    'remove / remove': (r: Awaited<ReturnType<typeof twoOwners>>) => [accounts.removeMember(r.as(r.a), r.b, null), accounts.removeMember(r.as(r.b), r.a, null)],
    'demote / remove': (r: Awaited<ReturnType<typeof twoOwners>>) => [accounts.changeRole(r.as(r.a), r.b, 'developer', null), accounts.removeMember(r.as(r.b), r.a, null)],
    'self-demote / self-demote': (r: Awaited<ReturnType<typeof twoOwners>>) => [accounts.changeRole(r.as(r.a), r.a, 'admin', null), accounts.changeRole(r.as(r.b), r.b, 'admin', null)],
  };

  for (const [name, run] of Object.entries(pairings)) {
    it(`${name}: ${ROUNDS} rounds, never without an owner, one change wins`, async () => {
      const failures: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const r = await twoOwners();
        const results = await Promise.all(run(r).map(outcome));
        const owners = (await accounts.listMembers(r.orgId)).filter((m) => m.role === 'owner');
        if (owners.length === 0) failures.push(`round ${round}: no owner left (${results.join(', ')})`);
        else if (results.sort().join(',') !== 'CONFLICT,ok') failures.push(`round ${round}: ${results.join(', ')}`);
      }
      expect(failures, `${failures.length}/${ROUNDS} rounds failed`).toEqual([]);
    }, 300_000);
  }
});
