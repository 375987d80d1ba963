/**
 * Two invites (from two organizations) for the same new address, accepted at the same moment with
 * a password, on PostgreSQL (real concurrent transactions; PGlite has one connection). Before the
 * fix both passed the "no account yet" check, both spent their link, one insert of the account
 * failed on the unique address: a 500, and that invite was lost. Now exactly one creates the
 * account; the other is told to sign in first (401) and its invite is still live, to be accepted
 * by the signed-in account. 30 rounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { AppError } from '../../src/kernel/errors.js';
import type { AccountService } from '../../src/accounts/accounts.service.js';
import { PASSWORD, linkToken } from './helpers.js';

const ROUNDS = 30;
let ctx: TestContext;
let accounts: AccountService;
let n = 0;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('two invites of one new address accepted at once', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    accounts = ctx.services.modules.accounts.accounts;
  }, 180_000);
  afterAll(async () => {
    await ctx?.close();
  });

  async function invite(orgId: string, email: string): Promise<string> {
    const res = await ctx.admin.post(`/v1/orgs/${orgId}/invites`).send({ email, role: 'developer' });
    expect(res.status, res.text).toBe(201);
    return linkToken(res.body.data.url);
  }

  async function newOrg(): Promise<string> {
    const created = await ctx.admin.post('/v1/orgs').send({ name: `Invite race ${++n}` });
    expect(created.status, created.text).toBe(201);
    return created.body.data.orgId as string;
  }

  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (error: unknown) => (error instanceof AppError ? error.code : `unexpected: ${String(error)}`),
    );

  it(`${ROUNDS} rounds: one account, the other invite answered 401 and still live`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const email = `invite-race-${round}-${Date.now()}@example.com`;
      const orgs = [await newOrg(), await newOrg()];
      const tokens = [await invite(orgs[0]!, email), await invite(orgs[1]!, email)];
      const results = await Promise.all(tokens.map((token) => outcome(accounts.acceptInvite({ token, password: PASSWORD, clientAddress: null }))));
      if (results.slice().sort().join(',') !== 'UNAUTHORIZED,ok') {
        failures.push(`round ${round}: ${results.join(', ')}`);
        continue;
      }
      const loser = results.indexOf('UNAUTHORIZED');
      const pending = await accounts.listInvites(orgs[loser]!);
      if (!pending.some((i) => i.email === email && !i.usedAt)) failures.push(`round ${round}: the refused invite was spent`);
    }
    expect(failures, `${failures.length}/${ROUNDS} rounds failed`).toEqual([]);
  }, 300_000);
});
