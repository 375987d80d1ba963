/**
 * 20 concurrent password guesses for one account, on PostgreSQL (real concurrent transactions;
 * PGlite has one connection): at most 5 passwords are verified in a window whatever the
 * interleaving (the attempt is reserved before its password is checked), the others are `429`,
 * and the right password among them signs in only when it is one of the 5 (issue 37, item 5).
 * ROUNDS rounds, the right password at a different place in each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { AppError } from '../../src/kernel/errors.js';
import { ACCOUNT_FAILURE_LIMIT, THROTTLE_WINDOW_MS, type AccountService } from '../../src/accounts/accounts.service.js';
import { PASSWORD, signUp, uniqueEmail } from './helpers.js';

const ROUNDS = 30;
const GUESSES = 20;
let ctx: TestContext;
let accounts: AccountService;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('20 concurrent password guesses for one account', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    accounts = ctx.services.modules.accounts.accounts;
  }, 180_000);
  afterAll(async () => {
    await ctx?.close();
  });

  const outcome = (p: Promise<unknown>) =>
    p.then(
      (result) => (result && typeof result === 'object' && 'token' in result ? 'signed_in' : 'second_factor'),
      (error: unknown) => (error instanceof AppError ? error.code : `unexpected: ${String(error)}`),
    );

  it(`${ROUNDS} rounds: at most ${ACCOUNT_FAILURE_LIMIT} of ${GUESSES} concurrent guesses are verified, the rest are 429`, async () => {
    const failures: string[] = [];
    let verifiedMax = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const member = await signUp(ctx, ctx.orgA.orgId, 'viewer', uniqueEmail(`race-${round}`));
      const right = round % GUESSES;
      const results = await Promise.all(
        Array.from({ length: GUESSES }, (_, i) =>
          // Each guess from its own client address: only the account's throttle is in play.
          outcome(accounts.signIn({ email: member.email, password: i === right ? PASSWORD : `wrong password number ${i}`, clientAddress: `198.51.100.${round * GUESSES + i}` })),
        ),
      );
      const verified = results.filter((r) => r !== 'RATE_LIMITED').length;
      verifiedMax = Math.max(verifiedMax, verified);
      const unexpected = results.filter((r) => !['RATE_LIMITED', 'UNAUTHORIZED', 'signed_in'].includes(r));
      if (verified > ACCOUNT_FAILURE_LIMIT || unexpected.length > 0) failures.push(`round ${round}: ${verified} verified (${results.join(', ')})`);
      // The next round starts after this window (the harness's clock).
      ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
    }
    expect(failures, `${failures.length}/${ROUNDS} rounds verified more than ${ACCOUNT_FAILURE_LIMIT} guesses (at most ${verifiedMax})`).toEqual([]);
  }, 600_000);

  it('20 concurrent wrong guesses leave the account locked: even the right password is 429 afterwards', async () => {
    const member = await signUp(ctx, ctx.orgA.orgId, 'viewer', uniqueEmail('race-lock'));
    await Promise.all(Array.from({ length: GUESSES }, (_, i) => outcome(accounts.signIn({ email: member.email, password: `wrong password number ${i}`, clientAddress: `198.18.0.${i}` }))));
    expect(await outcome(accounts.signIn({ email: member.email, password: PASSWORD, clientAddress: '198.18.1.1' }))).toBe('RATE_LIMITED');
    ctx.clock.advance(THROTTLE_WINDOW_MS + 1);
  }, 120_000);
});
