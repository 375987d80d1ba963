/**
 * An owner removing their only passkey while, at the same moment, turning on the organization's
 * "require a second factor" switch, on PostgreSQL (real concurrent transactions; PGlite has one
 * connection). The invariant: an organization that requires a second factor never has, as the
 * owner who turned it on (`updatedBy`), a user without a passkey — setRequireSecondFactor refuses
 * an owner without one, and removePasskey keeps the last one while a requirement is on. Whatever the
 * interleaving, exactly one of the two wins (the other is `409`). 60 rounds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { AppError } from '../../src/kernel/errors.js';
import type { AccountService } from '../../src/accounts/accounts.service.js';
import type { PasskeyService } from '../../src/accounts/passkeys.service.js';
import { newId } from '../../src/kernel/ids.js';

const ROUNDS = 60;
let ctx: TestContext;
let accounts: AccountService;
let passkeys: PasskeyService;
let n = 0;

describe.skipIf(!process.env.TEST_DATABASE_URL)(skippedUnless('removing the last passkey while the requirement is switched on', 'postgresOnly'), () => {
  beforeAll(async () => {
    ctx = await createTestContext();
    accounts = ctx.services.modules.accounts.accounts;
    passkeys = ctx.services.modules.accounts.passkeys;
  }, 180_000);
  afterAll(async () => {
    await ctx?.close();
  });

  /** A fresh organization whose owner has exactly one passkey (stored directly: no ceremony needed here). */
  async function ownerWithOnePasskey() {
    const created = await ctx.admin.post('/v1/orgs').send({ name: `Passkey race ${++n}` });
    expect(created.status, created.text).toBe(201);
    const orgId = created.body.data.orgId as string;
    const { user } = await accounts.ensureMember(orgId, `pk-race-${n}-${Date.now()}@example.com`, 'owner');
    const passkeyId = newId('PKY');
    await passkeys.repository.insertPasskey({
      id: passkeyId,
      userId: user.id,
      credentialId: `cred-race-${n}-${Date.now()}`,
      publicKey: 'AA',
      counter: 0,
      transports: ['internal'],
      deviceType: 'singleDevice',
      backedUp: false,
      name: 'Race key',
      createdAt: new Date(),
      lastUsedAt: null,
    });
    const auth = { orgId, userId: user.id, role: 'owner' as const, actor: { type: 'user' as const, id: user.id } };
    return { orgId, userId: user.id, passkeyId, auth: auth as unknown as Parameters<AccountService['removePasskey']>[0] };
  }

  const outcome = (p: Promise<unknown>) =>
    p.then(
      () => 'ok',
      (error: unknown) => (error instanceof AppError ? error.code : `unexpected: ${String(error)}`),
    );

  it(`remove the last passkey / require a second factor: ${ROUNDS} rounds, the enabling owner keeps a passkey, one wins`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const r = await ownerWithOnePasskey();
      const results = await Promise.all([outcome(accounts.removePasskey(r.auth, r.passkeyId, null)), outcome(accounts.setRequireSecondFactor(r.auth, true, null))]);
      const security = await passkeys.repository.security(r.orgId);
      const left = (await passkeys.list(r.userId)).length;
      if (security.requireSecondFactor && security.updatedBy === `user:${r.userId}` && left === 0) failures.push(`round ${round}: required, enabled by an owner with no passkey (remove ${results[0]}, require ${results[1]})`);
      else if ([...results].sort().join(',') !== 'CONFLICT,ok') failures.push(`round ${round}: remove ${results[0]}, require ${results[1]}`);
    }
    expect(failures, `${failures.length}/${ROUNDS} rounds failed`).toEqual([]);
  }, 300_000);
});
