/**
 * Retention of the accounts tables: audit entries are kept AUDIT_RETENTION_DAYS (400) days
 * (the table itself refuses an earlier delete); ended sessions, spent or expired links and old
 * sign-in failure windows are removed a day after they stopped mattering.
 */
import type { Job } from '../kernel/job.js';
import type { Clock } from '../kernel/clock.js';
import type { AccountRepository } from './accounts.repository.js';
import { AUDIT_RETENTION_DAYS } from './audit.service.js';
import type { PasskeyService } from './passkeys.service.js';

const DAY = 24 * 3600_000;
const BATCH = 1000;
/** Batches of expired challenges removed per run at most (more than the options' global budget per hour). */
const CHALLENGE_BATCHES = 50;

export function accountRetentionJob(repo: AccountRepository, clock: Clock, passkeys?: Pick<PasskeyService, 'removeExpiredChallenges'>): Job {
  return {
    name: 'account-retention',
    intervalMs: 3600_000,
    run: async () => {
      const now = clock.now().getTime();
      // A day's margin past the retention period: the table's trigger measures it by the database clock.
      const removed = await repo.removeExpired(new Date(now - (AUDIT_RETENTION_DAYS + 1) * DAY), new Date(now - DAY), BATCH);
      // Unspent WebAuthn challenges (five minutes each; spent ones are deleted when used) go once
      // expired, in batches until none is left: the sign-in options' budget bounds how many come in.
      let challenges = 0;
      for (let batch = 0; passkeys && batch < CHALLENGE_BATCHES; batch++) {
        const gone = await passkeys.removeExpiredChallenges(new Date(now), BATCH);
        challenges += gone;
        if (gone < BATCH) break;
      }
      return removed + challenges > 0;
    },
  };
}
