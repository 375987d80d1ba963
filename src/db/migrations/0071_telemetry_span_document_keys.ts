/**
 * Span documents (telemetry_traces.spans) get readable keys: {s, p, n, k, st, et, c, m, a} become
 * {span_id, parent_span_id, name, kind, start_ms, end_ms, status_code, status_message, attributes}.
 * Values are carried over as JSON text (json, not jsonb), so attributes keep their key order and
 * numbers their spelling. Traces are rewritten in key-ordered batches, each its own statement
 * outside a transaction: a large table is never locked whole, and an interrupted run resumes,
 * since only spans still in the other shape are converted.
 */
import type { Knex } from 'knex';

export const config = { transaction: false };

const BATCH = 500;

const READABLE: Array<[compact: string, readable: string]> = [
  ['s', 'span_id'],
  ['p', 'parent_span_id'],
  ['n', 'name'],
  ['k', 'kind'],
  ['st', 'start_ms'],
  ['et', 'end_ms'],
  ['c', 'status_code'],
  ['m', 'status_message'],
  ['a', 'attributes'],
];

/** Rewrites the span documents whose elements have `fromKeys[0]`, renaming fromKeys to toKeys. */
async function renameSpanKeys(db: Knex, fromKeys: string[], toKeys: string[]): Promise<void> {
  const marker = fromKeys[0]!;
  const build = `json_build_object(${toKeys.map((to, i) => `'${to}', e->'${fromKeys[i]}'`).join(', ')})`;
  let after: { project_id: string; trace_id: string } | undefined;
  for (;;) {
    const keys = (
      await db.raw(
        `SELECT project_id, trace_id FROM telemetry_traces
          ${after ? 'WHERE (project_id, trace_id) > (?, ?)' : ''}
          ORDER BY project_id, trace_id LIMIT ?`,
        after ? [after.project_id, after.trace_id, BATCH] : [BATCH],
      )
    ).rows as Array<{ project_id: string; trace_id: string }>;
    if (keys.length === 0) return;
    await db.raw(
      `UPDATE telemetry_traces t SET spans = (
         SELECT COALESCE(json_agg(CASE WHEN e->'${marker}' IS NULL THEN e ELSE ${build} END ORDER BY i), '[]'::json)::text
           FROM json_array_elements(t.spans::json) WITH ORDINALITY AS x(e, i))
        FROM json_to_recordset(?::json) AS k(project_id text, trace_id text)
       WHERE t.project_id = k.project_id AND t.trace_id = k.trace_id
         AND EXISTS (SELECT 1 FROM json_array_elements(t.spans::json) AS old(e) WHERE e->'${marker}' IS NOT NULL)`,
      [JSON.stringify(keys)],
    );
    after = keys[keys.length - 1];
  }
}

export async function up(db: Knex): Promise<void> {
  await renameSpanKeys(
    db,
    READABLE.map(([compact]) => compact),
    READABLE.map(([, readable]) => readable),
  );
}

export async function down(db: Knex): Promise<void> {
  await renameSpanKeys(
    db,
    READABLE.map(([, readable]) => readable),
    READABLE.map(([compact]) => compact),
  );
}
