/**
 * Bulk statements: COPY … FROM STDIN on a transaction's connection (node-postgres only; PGlite has
 * no COPY FROM STDIN) and the literals that carry many values in one parameter.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Knex } from 'knex';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

/** Streams COPY's text-format lines to the server on the transaction's own connection. */
export async function copyIn(trx: Knex.Transaction, sql: string, lines: string[]): Promise<void> {
  const client = (trx as unknown as { client: { acquireConnection(): Promise<pg.PoolClient> } }).client;
  const connection = await client.acquireConnection();
  // A few large chunks: one per ~64 rows keeps memory flat without a write per row.
  const chunks: string[] = [];
  for (let i = 0; i < lines.length; i += 64) chunks.push(lines.slice(i, i + 64).join(''));
  await pipeline(Readable.from(chunks), connection.query(copyFrom(sql)));
}

/** A field of COPY's text format: backslash, tab, newline and carriage return escaped; null is \N. */
export function copyText(value: string | null): string {
  if (value === null) return '\\N';
  return /[\\\t\n\r]/.test(value)
    ? value.replace(/[\\\t\n\r]/g, (ch) => (ch === '\\' ? '\\\\' : ch === '\t' ? '\\t' : ch === '\n' ? '\\n' : '\\r'))
    : value;
}

/** A text[] literal with every element quoted. */
export function textArray(values: string[]): string {
  return `{${values.map((v) => `"${v.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`).join(',')}}`;
}

/** A text[] literal of ids made of [0-9A-Za-z_] only (no quoting needed). */
export function idArray(ids: string[]): string {
  for (const id of ids) if (!/^[0-9A-Za-z_]+$/.test(id)) throw new Error('idArray takes plain identifiers only');
  return `{${ids.join(',')}}`;
}
