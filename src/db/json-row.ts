/**
 * A row read as one json column instead of one column per field, for the reads by id every
 * merchant request path makes. node-postgres sets up its field list, type parsers and an empty row
 * object again on every execution (named statement or not), field by field: about 0.7 µs of the
 * server's CPU per field, 20 µs for a 30-column row (docs/benchmarks.md). One json column costs
 * that once, plus one JSON.parse.
 *
 * Values keep what they would parse to column by column: text, numbers and booleans as JSON
 * does, jsonb nested as itself, bigint as a number (as our int8 parser reads it), and timestamptz
 * as its epoch milliseconds (truncated to the millisecond as the timestamptz parser truncates), for
 * `new Date(ms)`.
 */

/** A row type as jsonRowSql returns it: timestamps as epoch milliseconds. */
export type JsonRow<Row> = { [K in keyof Row]: Row[K] extends Date ? number : Row[K] extends Date | null ? number | null : Row[K] };

/**
 * `json_build_object('id', s.id, …)` of the listed columns of `alias` (timestamptz columns named
 * in `timestamps`), plus `extra` (name → SQL expression) for columns of joined tables.
 */
export function jsonRowSql(alias: string, columns: readonly string[], timestamps: ReadonlySet<string>, extra: Record<string, string> = {}): string {
  const pairs = columns.map((c) => `'${c}', ${timestamps.has(c) ? `(extract(epoch from date_trunc('milliseconds', ${alias}.${c})) * 1000)::int8` : `${alias}.${c}`}`);
  for (const [name, expression] of Object.entries(extra)) pairs.push(`'${name}', ${expression}`);
  // json_build_object takes at most 100 arguments.
  if (pairs.length > 50) throw new Error(`jsonRowSql: ${pairs.length} columns, at most 50`);
  return `json_build_object(${pairs.join(', ')})`;
}
