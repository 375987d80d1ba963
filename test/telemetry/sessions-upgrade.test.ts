/**
 * Migration 0210 on an installation that already holds many traces (PostgreSQL): the backfill
 * runs past the pool's statement timeout (at 2.2M traces it took longer than 15 s and the upgrade
 * failed: found by the explorer bench on its kept 11M-span data set), and traces written while it
 * runs wait for it, so that none is missing from the rollups.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as m0210 from '../../src/db/migrations/0210_telemetry_sessions.js';
import { migrationSource } from '../../src/db/migrations/index.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createProjectWithKey, type TelemetryKeyFixture } from './helpers.js';

const onPostgres = Boolean(process.env.TEST_DATABASE_URL);
const TRACES = 300_000;

describe.skipIf(!onPostgres)(skippedUnless('migration 0210 on a large telemetry table', 'postgresOnly'), () => {
  let ctx: TestContext;
  let project: TelemetryKeyFixture;
  const db = () => ctx.testDb.database.db;

  beforeAll(async () => {
    ctx = await createTestContext();
    project = await createProjectWithKey(ctx, ctx.orgA.orgId, 'Upgrade');
    // In slices: one 300k-row INSERT outlasted the pool's timeouts on a loaded machine (the
    // server's 15 s statement timeout, then node-postgres's 20 s query timeout).
    for (let from = 1; from <= TRACES; from += TRACES / 10) {
      await db().raw(
        `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes,
                                       models, tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, partition_start)
         SELECT ?, lpad(to_hex(i), 32, '0'), now() - make_interval(secs => i), now() - make_interval(secs => i) + interval '1 second', 1000, 1,
                'root', '{}', '{}', 10, 5, 0.001, i % 50 = 0, '[]', now(), now(), 'sess-' || (i / 4), 'user-' || (i % 997), now() - make_interval(secs => i)
           FROM generate_series(?::int, ?::int) AS i`,
        [project.projectId, from, from + TRACES / 10 - 1],
      );
    }
    await db().migrate.down({ migrationSource, name: '0210_telemetry_sessions' });
  }, 300_000);

  /** One statement in a transaction of its own, on a pooled connection, with neither timeout. */
  async function untimed(text: string, values: unknown[]): Promise<void> {
    type Connection = { query(q: string | { text: string; values?: unknown[]; query_timeout?: number }): Promise<unknown> };
    const client = db().client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
    const connection = await client.acquireConnection();
    try {
      await connection.query('BEGIN');
      await connection.query(`SET LOCAL statement_timeout = 0`);
      await connection.query({ text, values, query_timeout: 600_000 });
      await connection.query('COMMIT');
    } finally {
      await client.releaseConnection(connection);
    }
  }

  async function untilTracesShareLocked(): Promise<void> {
    for (let tries = 0; tries < 6000; tries++) {
      const held = await db().raw(
        `SELECT 1 FROM pg_locks WHERE relation = 'telemetry_traces'::regclass AND mode = 'ShareLock' AND granted`,
      );
      if (held.rows.length > 0) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('the migration never locked telemetry_traces');
  }

  afterAll(async () => {
    await ctx?.close();
  });

  it('the backfill outlasts a short statement timeout, and a trace written meanwhile waits for it to commit', async () => {
    let committedAt = 0;
    let migrating!: () => void;
    const started = new Promise<void>((resolve) => (migrating = resolve));
    const migration = db().transaction(async (trx) => {
      // As the pool's 15 s are to 2.2M traces: shorter than the backfill of these traces (seconds),
      // long enough for the CREATE TABLEs before it on a loaded machine.
      await trx.raw(`SET LOCAL statement_timeout = '1s'`);
      migrating();
      await m0210.up(trx);
    }).then(() => (committedAt = performance.now()));
    await started;
    const startedAt = performance.now();
    // The migration creates its tables before it locks telemetry_traces: wait for the lock itself,
    // not a fixed delay (30 ms was not always enough on a loaded CI machine, and the INSERT went first).
    await untilTracesShareLocked();
    // It waits for the whole backfill: without the pool's timeouts (15 s on the server, 20 s on
    // the client), which a loaded machine's backfill can outlast.
    const written = untimed(
      `INSERT INTO telemetry_traces (project_id, trace_id, start_time, end_time, duration_ms, span_count, root_name, root_attributes,
                                     models, tokens_input, tokens_output, cost, has_error, spans, created_at, updated_at, session_id, user_id, partition_start)
       VALUES ($1, 'f0000000000000000000000000000001', now(), now(), 0, 1, 'late', '{}', '{}', 0, 0, 0, false, '[]', now(), now(), 'late', 'late', now())`,
      [project.projectId],
    ).then(() => performance.now());
    await migration;
    const writtenAt = await written;
    expect(writtenAt).toBeGreaterThanOrEqual(committedAt);
    // Longer than its statement timeout: without the migration's own SET LOCAL it would have been cancelled.
    expect(committedAt - startedAt).toBeGreaterThan(1000);
    const sessions = await db()('telemetry_sessions').where({ project_id: project.projectId }).count<{ count: string }[]>('* as count');
    expect(Number(sessions[0]!.count)).toBe(TRACES / 4 + 1);
    const users = await db()('telemetry_users').where({ project_id: project.projectId }).sum<{ sum: string }[]>('trace_count as sum');
    expect(Number(users[0]!.sum)).toBe(TRACES);
  }, 300_000);
});
