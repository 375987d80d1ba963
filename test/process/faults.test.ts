/**
 * The fault scenarios of tools/faults/ (also `npm run fault:db-outage` / `fault:kill-worker`),
 * asserted: PostgreSQL stopped under load (through a TCP proxy, so the shared server keeps
 * running), and a worker killed with SIGKILL during deliveries, renewals and chain watching (a
 * local Hardhat node in this process). Real child processes on PostgreSQL: they run only with
 * TEST_DATABASE_URL.
 */
import { describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { RECOVERY_BOUND_MS, STOPPED_BOUND_MS, runDbOutage } from '../../tools/faults/db-outage.js';
import { CHAIN_LEASE_SECONDS, runKillWorker } from '../../tools/faults/kill-worker.js';

const serverUrl = process.env.TEST_DATABASE_URL;

describe.skipIf(!serverUrl)(skippedUnless('faults', 'postgresOnly'), () => {
  it('PostgreSQL stopped under load: fast 503 SERVICE_UNAVAILABLE, nothing half-written, recovery within 5 s without a restart', async () => {
    const report = await runDbOutage({ serverUrl });
    const [stopped] = report.phases;
    expect(stopped!.requestsDuringOutage).toBeGreaterThan(0);
    // Only 201 (committed before the cut) or the 503 envelope: never a 500, never a hang.
    expect(stopped!.unexpected).toEqual([]);
    expect(stopped!.statusesDuringOutage['503 SERVICE_UNAVAILABLE']).toBeGreaterThan(0);
    expect(stopped!.maxOutageLatencyMs).toBeLessThanOrEqual(STOPPED_BOUND_MS);
    expect(stopped!.recoveryMs).not.toBeNull();
    expect(stopped!.recoveryMs!).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
    expect(report.bodyOf503).toEqual({
      success: false,
      message: 'Service temporarily unavailable, retry later',
      error: { code: 'SERVICE_UNAVAILABLE', message: 'Service temporarily unavailable, retry later' },
    });
    // Atomic creations: no session without its idempotency record or the reverse, and every
    // refused key creates (or replays) exactly one session when retried after the outage.
    expect(report.orphans).toBe(0);
    expect(report.retried).toBeGreaterThan(0);
    expect(report.retryFailures).toEqual([]);
    expect(report.duplicateSessions).toBe(0);
    expect(report.sessionsCreated).toBe(report.keys);
    // The outage was logged as such, not as a bug.
    expect(report.serverLog).toContain('request failed');
    expect(report.serverLog).not.toContain('unhandled error');
  }, 180_000);

  it('a worker killed with SIGKILL mid-delivery, mid-renewal and mid-scan of the chain: nothing lost, nothing duplicated beyond at-least-once', async () => {
    const report = await runKillWorker({ serverUrl });
    const d = report.deliveries;
    expect(d.leasedAtKill).toBeGreaterThan(0);
    expect(d.lost).toEqual([]);
    expect(d.notSucceeded).toBe(0);
    // A second copy only for an attempt the dead worker never recorded.
    expect(d.unexplainedDuplicates).toEqual([]);
    expect(d.abandonedAttempts).toBeGreaterThanOrEqual(d.duplicates.length);
    expect(d.maxConcurrentPerId).toBe(1);
    const r = report.renewals;
    expect(r.renewedAtKill).toBeLessThan(r.subscriptions);
    expect(r.notRenewed).toBe(0);
    expect(r.wrongOrderCount).toBe(0);
    expect(r.wrongPaidEvents).toBe(0);
    expect(r.wrongUpdatedEvents).toBe(0);
    const c = report.chainWatching;
    // Killed mid-pass, holding the cursor's lease, before every session was seen.
    expect(c.leaseHeldAtKill).toBe(true);
    expect(c.completedAtKill).toBeGreaterThanOrEqual(1);
    expect(c.completedAtKill).toBeLessThan(c.sessions);
    // The dead worker's lease lapsed by itself within one lease of the kill, the replacement up meanwhile.
    expect(c.secondsLeaseOutlivedKill).toBeLessThanOrEqual(CHAIN_LEASE_SECONDS);
    expect(c.secondsReplacementWaited).toBeGreaterThan(0);
    // One scanner per chain: the replacement waits for the lease, then resumes where the dead worker saved.
    expect(c.scansWhileLeased).toBe(0);
    expect(c.cursorMovedWhileLeased).toBe(false);
    expect(c.resumedFrom).toBe(c.cursorAtKill);
    expect(c.cursorAtHead).toBe(true);
    // Every session exactly once: COMPLETE, one PAID order, one order.pending, one order.paid (one delivery of it), one transfer row.
    expect(c).toMatchObject({ notComplete: 0, wrongOrders: 0, wrongPendingEvents: 0, wrongPaidEvents: 0, wrongPaidDeliveries: 0, wrongTransfers: 0, transferRows: c.sessions });
    // Three phases, each waiting on its own bounds (up to a minute a step): 240 s in all ran out on
    // a loaded machine with the scenario still progressing.
  }, 600_000);
});
