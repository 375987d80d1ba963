/**
 * The session and user rollups (telemetry_sessions, telemetry_users; migration 0210), kept equal
 * to a GROUP BY over telemetry_traces once the queued changes are applied. Every writer of traces
 * (ingest, retention, the bench's data generator) queues its batch's changes in its own
 * transaction (`enqueueTraceChanges`, one row of telemetry_group_changes, migration 0211): a
 * committed trace always has its committed change, and ingest writes one small row instead of
 * ~280 session and ~280 user upserts per 1000-span batch. The worker's telemetry-group-changes job
 * (`applyQueuedTraceChanges`) applies the oldest rows in id order, one applier at a time, each
 * project's changes of many batches merged into one `applyTraceChanges` call; the lists lag ingest
 * by about the job's interval (1 s).
 *
 * Why id order is enough: a batch changing a trace locked it (FOR UPDATE) until the batch before
 * it committed, so its queue row was inserted later; the changes of one trace are applied in the
 * order they were made (applying them out of order could leave a stale first_start / last_end
 * through LEAST / GREATEST, or recreate an emptied row). Changes of different traces commute. A
 * recompute (below) reads telemetry_traces, which may be ahead of the queue: it then includes a
 * trace whose queued change is not applied yet — harmless, as that change adds the same value
 * through LEAST / GREATEST, or removes it and recomputes again.
 *
 * The changes (a trace added, removed, or its summary replaced; of one or many batches) are pre-aggregated per key
 * and applied with one `INSERT … ON CONFLICT DO UPDATE SET x = x + excluded.x` per table, rows in
 * key order (the same lock order in every transaction: traces, then sessions, then users — no
 * deadlock). Sums are exact under concurrency (row locks); first_start / last_end / the session's
 * user take LEAST / GREATEST of what is added. What is removed cannot be subtracted from a min or
 * max: when a removed trace held a row's extreme (its start was the first start, its end the last
 * end, its user the session's user), a second statement recomputes that column from the traces —
 * after the first took the row locks, so its snapshot holds every committed change to the group,
 * and a change not yet committed comes after, through LEAST / GREATEST. Rows left with no trace
 * are deleted. A session's user changing (created, deleted, or a smaller user id arrives) moves it
 * between its users' `session_count`s: the upsert returns the user before it (`previous_user_id`,
 * which it sets on update; NULL on a row it creates — the `xmax = 0` case).
 */
import type { Knex } from 'knex';
import { textArray } from '../db/bulk.js';

/** What a trace contributes to its session and user. */
export interface GroupContribution {
  sessionId: string | null;
  userId: string | null;
  startMs: number;
  endMs: number;
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  hasError: boolean;
}

/** A trace written: `before` its stored summary (null when new), `after` its new one (null when deleted). */
export interface TraceChange {
  before: GroupContribution | null;
  after: GroupContribution | null;
}

interface Delta {
  key: string;
  traces: number;
  tokensInput: number;
  tokensOutput: number;
  cost: number;
  errors: number;
  /** Earliest start and latest end added (null: none). */
  addStart: number | null;
  addEnd: number | null;
  /** Starts and ends no longer held (null: none); a row whose extreme equals one is recomputed. */
  removedStart: number | null;
  removedEnd: number | null;
  /** Sessions: users added, users removed. */
  addUsers: Set<string>;
  removedUsers: Set<string>;
}

const newDelta = (key: string): Delta => ({
  key,
  traces: 0,
  tokensInput: 0,
  tokensOutput: 0,
  cost: 0,
  errors: 0,
  addStart: null,
  addEnd: null,
  removedStart: null,
  removedEnd: null,
  addUsers: new Set(),
  removedUsers: new Set(),
});

const minOf = (a: number | null, b: number) => (a === null || b < a ? b : a);
const maxOf = (a: number | null, b: number) => (a === null || b > a ? b : a);

/** Per-key deltas of a batch's changes, for the key `keyOf` (session or user). */
function deltas(changes: TraceChange[], keyOf: (c: GroupContribution) => string | null, users: boolean): Map<string, Delta> {
  const out = new Map<string, Delta>();
  const at = (key: string) => {
    let d = out.get(key);
    if (!d) out.set(key, (d = newDelta(key)));
    return d;
  };
  const add = (d: Delta, c: GroupContribution, sign: 1 | -1) => {
    d.traces += sign;
    d.tokensInput += sign * c.tokensInput;
    d.tokensOutput += sign * c.tokensOutput;
    d.cost += sign * c.cost;
    d.errors += sign * (c.hasError ? 1 : 0);
  };
  for (const { before, after } of changes) {
    const from = before ? keyOf(before) : null;
    const to = after ? keyOf(after) : null;
    if (from !== null && from === to) {
      // The same group: the difference, and the extremes the trace no longer holds.
      const d = at(from);
      add(d, before!, -1);
      add(d, after!, 1);
      d.addStart = minOf(d.addStart, after!.startMs);
      d.addEnd = maxOf(d.addEnd, after!.endMs);
      if (after!.startMs > before!.startMs) d.removedStart = minOf(d.removedStart, before!.startMs);
      if (after!.endMs < before!.endMs) d.removedEnd = maxOf(d.removedEnd, before!.endMs);
      if (users && before!.userId !== after!.userId) {
        if (before!.userId !== null) d.removedUsers.add(before!.userId);
        if (after!.userId !== null) d.addUsers.add(after!.userId);
      }
      continue;
    }
    if (from !== null) {
      const d = at(from);
      add(d, before!, -1);
      d.removedStart = minOf(d.removedStart, before!.startMs);
      d.removedEnd = maxOf(d.removedEnd, before!.endMs);
      if (users && before!.userId !== null) d.removedUsers.add(before!.userId);
    }
    if (to !== null) {
      const d = at(to);
      add(d, after!, 1);
      d.addStart = minOf(d.addStart, after!.startMs);
      d.addEnd = maxOf(d.addEnd, after!.endMs);
      if (users && after!.userId !== null) d.addUsers.add(after!.userId);
    }
  }
  return out;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A delta is removal-free when nothing it removes can hold an extreme. */
const removes = (d: Delta) => d.removedStart !== null || d.removedEnd !== null || d.removedUsers.size > 0 || d.traces < 0;

const upsertRows = (list: Delta[], sessionCounts?: Map<string, number>) =>
  JSON.stringify(
    list.map((d) => ({
      k: d.key,
      us: [...d.addUsers],
      fs: iso(d.addStart),
      le: iso(d.addEnd),
      n: d.traces,
      ti: d.tokensInput,
      to: d.tokensOutput,
      c: d.cost,
      e: d.errors,
      sc: sessionCounts?.get(d.key) ?? 0,
    })),
  );

const recomputeRows = (list: Delta[]) =>
  JSON.stringify(list.map((d) => ({ k: d.key, rs: iso(d.removedStart), re: iso(d.removedEnd), ru: [...d.removedUsers] })));

/**
 * Applies trace changes (in the order they were made) to the session and user rollups, inside
 * `trx` (the queue's applier; the traces are written, or deleted, already). At most one statement per table when nothing is
 * removed (the ingest of new or growing traces), three when something is.
 */
export async function applyTraceChanges(trx: Knex.Transaction, projectId: string, changes: TraceChange[]): Promise<void> {
  if (changes.length === 0) return;
  const sessions = [...deltas(changes, (c) => c.sessionId, true).values()];
  const users = deltas(changes, (c) => c.userId, false);
  // Users that gained (+1) or lost (-1) a session as its user.
  const sessionCounts = new Map<string, number>();
  const count = (user: string | null, by: number) => {
    if (user !== null) sessionCounts.set(user, (sessionCounts.get(user) ?? 0) + by);
  };

  if (sessions.length > 0) {
    // The user of each session before this batch, and now.
    const before = new Map<string, string | null>();
    const now = new Map<string, string | null>();
    // A row with nothing added carries first_start = last_end = infinity: neutral to LEAST, skipped
    // for last_end, and a valid range for the GiST index should it be inserted (a removal from a
    // session the rollup never counted: the row is deleted below, having no trace).
    const upserted = await trx.raw(
      `INSERT INTO telemetry_sessions AS s (project_id, session_id, user_id, first_start, last_end, trace_count, tokens_input,
                                            tokens_output, cost, error_count)
       SELECT ?, x.k, (SELECT min(u) FROM unnest(x.us) u), coalesce(x.fs, 'infinity'), coalesce(x.le, 'infinity'), x.n, x.ti, x."to", x.c, x.e
         FROM json_to_recordset(?::json) AS x(k text, us text[], fs timestamptz, le timestamptz, n int, ti bigint, "to" bigint, c float8, e int)
        ORDER BY x.k
       ON CONFLICT (project_id, session_id) DO UPDATE SET
         previous_user_id = s.user_id,
         user_id = LEAST(s.user_id, excluded.user_id),
         first_start = LEAST(s.first_start, excluded.first_start),
         last_end = CASE WHEN excluded.last_end = 'infinity' THEN s.last_end ELSE GREATEST(s.last_end, excluded.last_end) END,
         trace_count = s.trace_count + excluded.trace_count,
         tokens_input = s.tokens_input + excluded.tokens_input,
         tokens_output = s.tokens_output + excluded.tokens_output,
         cost = s.cost + excluded.cost,
         error_count = s.error_count + excluded.error_count
       RETURNING session_id, user_id, previous_user_id`,
      [projectId, upsertRows(sessions)],
    );
    for (const r of upserted.rows as Array<{ session_id: string; user_id: string | null; previous_user_id: string | null }>) {
      before.set(r.session_id, r.previous_user_id);
      now.set(r.session_id, r.user_id);
    }
    const removing = sessions.filter(removes);
    if (removing.length > 0) {
      const recomputed = await trx.raw(
        `UPDATE telemetry_sessions s SET
           first_start = CASE WHEN x.rs IS NOT NULL AND s.first_start >= x.rs
             THEN coalesce((SELECT min(t.start_time) FROM telemetry_traces t WHERE t.project_id = s.project_id AND t.session_id = s.session_id), s.first_start)
             ELSE s.first_start END,
           last_end = CASE WHEN x.re IS NOT NULL AND s.last_end <= x.re
             THEN coalesce((SELECT max(t.end_time) FROM telemetry_traces t WHERE t.project_id = s.project_id AND t.session_id = s.session_id), s.last_end)
             ELSE s.last_end END,
           user_id = CASE WHEN s.user_id = ANY(x.ru)
             THEN (SELECT min(t.user_id) FROM telemetry_traces t WHERE t.project_id = s.project_id AND t.session_id = s.session_id)
             ELSE s.user_id END
         FROM json_to_recordset(?::json) AS x(k text, rs timestamptz, re timestamptz, ru text[])
        WHERE s.project_id = ? AND s.session_id = x.k AND s.trace_count > 0
        RETURNING s.session_id, s.user_id`,
        [recomputeRows(removing), projectId],
      );
      for (const r of recomputed.rows as Array<{ session_id: string; user_id: string | null }>) now.set(r.session_id, r.user_id);
      const emptied = await trx.raw(
        `DELETE FROM telemetry_sessions WHERE project_id = ? AND session_id = ANY(?::text[]) AND trace_count <= 0 RETURNING session_id`,
        [projectId, textArray(removing.map((d) => d.key))],
      );
      for (const r of emptied.rows as Array<{ session_id: string }>) now.set(r.session_id, null);
    }
    for (const [session, user] of now) {
      const previous = before.get(session) ?? null;
      if (previous !== user) (count(previous, -1), count(user, 1));
    }
  }

  // A user whose only change is a session gained or lost has a row (their trace is in that
  // session) — unless the rollups never counted it (an earlier release wrote the trace): such a
  // row, made here with no trace, is deleted below.
  const countOnly = new Set<string>();
  for (const [user, by] of sessionCounts) if (by !== 0 && !users.has(user)) (users.set(user, newDelta(user)), countOnly.add(user));
  const userList = [...users.values()];
  if (userList.length === 0) return;
  await trx.raw(
    `INSERT INTO telemetry_users AS u (project_id, user_id, first_start, last_end, session_count, trace_count, tokens_input,
                                       tokens_output, cost, error_count)
     SELECT ?, x.k, coalesce(x.fs, 'infinity'), coalesce(x.le, '-infinity'), x.sc, x.n, x.ti, x."to", x.c, x.e
       FROM json_to_recordset(?::json) AS x(k text, fs timestamptz, le timestamptz, sc int, n bigint, ti bigint, "to" bigint, c float8, e bigint)
      ORDER BY x.k
     ON CONFLICT (project_id, user_id) DO UPDATE SET
       first_start = LEAST(u.first_start, excluded.first_start),
       last_end = GREATEST(u.last_end, excluded.last_end),
       session_count = u.session_count + excluded.session_count,
       trace_count = u.trace_count + excluded.trace_count,
       tokens_input = u.tokens_input + excluded.tokens_input,
       tokens_output = u.tokens_output + excluded.tokens_output,
       cost = u.cost + excluded.cost,
       error_count = u.error_count + excluded.error_count`,
    [projectId, upsertRows(userList, sessionCounts)],
  );
  const removing = userList.filter((d) => removes(d) || countOnly.has(d.key));
  if (removing.length === 0) return;
  await trx.raw(
    `UPDATE telemetry_users u SET
       first_start = CASE WHEN x.rs IS NOT NULL AND u.first_start >= x.rs
         THEN coalesce((SELECT min(t.start_time) FROM telemetry_traces t WHERE t.project_id = u.project_id AND t.user_id = u.user_id), u.first_start)
         ELSE u.first_start END,
       last_end = CASE WHEN x.re IS NOT NULL AND u.last_end <= x.re
         THEN coalesce((SELECT max(t.end_time) FROM telemetry_traces t WHERE t.project_id = u.project_id AND t.user_id = u.user_id), u.last_end)
         ELSE u.last_end END
      FROM json_to_recordset(?::json) AS x(k text, rs timestamptz, re timestamptz, ru text[])
     WHERE u.project_id = ? AND u.user_id = x.k AND u.trace_count > 0`,
    [recomputeRows(removing), projectId],
  );
  await trx.raw(`DELETE FROM telemetry_users WHERE project_id = ? AND user_id = ANY(?::text[]) AND trace_count <= 0`, [
    projectId,
    textArray(removing.map((d) => d.key)),
  ]);
}

// ---- The queue (migration 0211): changes applied off the ingest path -------------------------

/** A contribution as stored in the queue: [session, user, start ms, end ms, tokens in, tokens out, cost, error 0/1]. */
type PackedContribution = [string | null, string | null, number, number, number, number, number, 0 | 1];

const pack = (c: GroupContribution | null): PackedContribution | null =>
  c === null ? null : [c.sessionId, c.userId, c.startMs, c.endMs, c.tokensInput, c.tokensOutput, c.cost, c.hasError ? 1 : 0];

const unpack = (p: PackedContribution | null): GroupContribution | null =>
  p === null
    ? null
    : { sessionId: p[0], userId: p[1], startMs: p[2], endMs: p[3], tokensInput: p[4], tokensOutput: p[5], cost: p[6], hasError: p[7] === 1 };

/**
 * Appends a batch's trace changes to the queue, inside `trx` (the transaction that wrote the
 * traces): one row, so a committed trace always has its committed change. Changes that touch no
 * session and no user are left out; a batch with none writes nothing.
 */
export async function enqueueTraceChanges(trx: Knex.Transaction, projectId: string, changes: TraceChange[], now: Date): Promise<void> {
  const packed: Array<[PackedContribution | null, PackedContribution | null]> = [];
  for (const { before, after } of changes) {
    const touches = (c: GroupContribution | null) => c !== null && (c.sessionId !== null || c.userId !== null);
    if (touches(before) || touches(after)) packed.push([pack(before), pack(after)]);
  }
  if (packed.length === 0) return;
  await trx.raw('INSERT INTO telemetry_group_changes (project_id, changes, created_at) VALUES (?, ?, ?)', [projectId, JSON.stringify(packed), now]);
}

/** The advisory lock of the queue's applier (one at a time: changes are applied in id order), hashed by PostgreSQL to its key. */
export const APPLIER_LOCK = 'telemetry-group-changes';

/**
 * Applies the oldest `limit` queued batches (by id) to the rollups and deletes them, in one
 * transaction, under a transaction-level advisory lock: one applier at a time. Id order is the
 * order of the changes to any one trace (a batch changing a trace waited for the batch before it
 * to commit, so it queued its row later); changes of different traces commute (sums, LEAST /
 * GREATEST, and recomputes from the traces). Each project's changes go through
 * `applyTraceChanges` once, merged per session and user. The chunk's projects are locked FOR KEY
 * SHARE first (a project being deleted is waited for, then skipped: its queue rows went with it).
 * Returns the number of queue rows applied, or -1 when another applier holds the lock.
 */
export async function applyQueuedTraceChanges(db: Knex, limit: number): Promise<number> {
  return db.transaction(async (trx) => {
    const locked = await trx.raw('SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0)) AS ok', [APPLIER_LOCK]);
    if (!(locked.rows as Array<{ ok: boolean }>)[0]?.ok) return -1;
    const queued = await trx.raw('SELECT id, project_id, changes FROM telemetry_group_changes ORDER BY id LIMIT ?', [limit]);
    const rows = queued.rows as Array<{ id: string; project_id: string; changes: string }>;
    if (rows.length === 0) return 0;
    const byProject = new Map<string, TraceChange[]>();
    for (const r of rows) {
      let list = byProject.get(r.project_id);
      if (!list) byProject.set(r.project_id, (list = []));
      for (const [before, after] of JSON.parse(r.changes) as Array<[PackedContribution | null, PackedContribution | null]>) {
        list.push({ before: unpack(before), after: unpack(after) });
      }
    }
    const projects = [...byProject.keys()].sort();
    const live = await trx.raw('SELECT id FROM telemetry_projects WHERE id = ANY(?::text[]) ORDER BY id FOR KEY SHARE', [textArray(projects)]);
    for (const { id } of live.rows as Array<{ id: string }>) await applyTraceChanges(trx, id, byProject.get(id)!);
    await trx.raw('DELETE FROM telemetry_group_changes WHERE id <= ? AND id = ANY(?::bigint[])', [rows[rows.length - 1]!.id, `{${rows.map((r) => r.id).join(',')}}`]);
    return rows.length;
  });
}

/**
 * Applies queued changes until the queue is empty (or another applier holds the lock: then waits
 * for it and goes on). For tests, the bench's data generator, and retention-free callers that need
 * the lists exact now. Returns the number of queue rows applied.
 */
export async function drainQueuedTraceChanges(db: Knex, chunk = 500): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await applyQueuedTraceChanges(db, chunk);
    if (n === -1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      continue;
    }
    total += n;
    if (n < chunk) return total;
  }
}

/** The queue's applier, for the job (src/telemetry/group-changes.job.ts). */
export interface GroupChangeRepository {
  /** One chunk: the number of queue rows applied, -1 when another applier holds the lock. */
  applyQueued(limit: number): Promise<number>;
  /** Everything queued. */
  drain(chunk: number): Promise<number>;
}

export class KnexGroupChangeRepository implements GroupChangeRepository {
  constructor(private readonly db: Knex) {}

  applyQueued(limit: number): Promise<number> {
    return applyQueuedTraceChanges(this.db, limit);
  }

  drain(chunk: number): Promise<number> {
    return drainQueuedTraceChanges(this.db, chunk);
  }
}
