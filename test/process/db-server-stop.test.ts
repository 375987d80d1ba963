/**
 * `npm run fault:db-outage -- --stop`, asserted: the API process's own PostgreSQL server is
 * really stopped under load — a clean shutdown (`pg_ctl stop -m fast`, sessions terminated with
 * 57P01) and a crash (`-m immediate`, crash recovery at the next start) — and started again.
 * test/process/faults.test.ts cuts the shared server away through a proxy instead; this one
 * shows the error codes a real server sends while it shuts down and recovers also answer 503.
 * Runs with TEST_DATABASE_URL (the PostgreSQL pass) where PostgreSQL's server binaries are installed.
 */
import { describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { RECOVERY_BOUND_MS, STOPPED_BOUND_MS, runDbOutage } from '../../tools/faults/db-outage.js';
import { postgresBinDir } from '../../tools/cluster.js';

const runs = !!process.env.TEST_DATABASE_URL && (await postgresBinDir()) !== undefined;

describe.skipIf(!runs)(skippedUnless('PostgreSQL server stopped and crashed under load', 'postgresServerBinaries'), () => {
  it('answers 201 or a fast 503 SERVICE_UNAVAILABLE, loses nothing, and recovers within 5 s of the server accepting connections', async () => {
    const report = await runDbOutage({ stopServer: true });
    expect(report.phases.map((p) => p.mode)).toEqual(['stop-fast', 'stop-immediate']);
    for (const phase of report.phases) {
      expect(phase.requestsDuringOutage).toBeGreaterThan(0);
      expect(phase.unexpected).toEqual([]);
      expect(phase.statusesDuringOutage['503 SERVICE_UNAVAILABLE']).toBeGreaterThan(0);
      expect(phase.maxOutageLatencyMs).toBeLessThanOrEqual(STOPPED_BOUND_MS);
      expect(phase.recoveryMs).not.toBeNull();
      expect(phase.recoveryMs!).toBeLessThanOrEqual(RECOVERY_BOUND_MS);
    }
    expect(report.bodyOf503).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    expect(report.orphans).toBe(0);
    expect(report.retryFailures).toEqual([]);
    expect(report.duplicateSessions).toBe(0);
    expect(report.sessionsCreated).toBe(report.keys);
    expect(report.serverLog).not.toContain('unhandled error');
  }, 180_000);
});
