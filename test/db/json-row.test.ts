/**
 * A row read as one json column (src/db/json-row.ts) holds what the same row read column by
 * column through the driver holds (pg on PostgreSQL, PGlite otherwise), timestamps as the epoch
 * milliseconds of the Date the timestamptz parser makes: a differential test on random rows
 * (text with escapes and astral characters, bigint, integer, boolean, nested jsonb, nulls,
 * timestamps before 1970 and up to year 9999).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonRowSql } from '../../src/db/json-row.js';
import { runStatement } from '../../src/db/knex.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

let test: TestDatabase;

beforeAll(async () => {
  test = await freshDatabase();
  await test.database.db.raw(
    'CREATE TABLE json_row_probe (id text PRIMARY KEY, label text, amount bigint NOT NULL, quantity integer, flag boolean, doc jsonb, at timestamptz(3) NOT NULL, maybe_at timestamptz(3))',
  );
});
afterAll(async () => {
  await test?.drop();
});

const COLUMNS = ['id', 'label', 'amount', 'quantity', 'flag', 'doc', 'at', 'maybe_at'] as const;
const TIMESTAMPS = new Set(['at', 'maybe_at']);

describe('jsonRowSql', () => {
  it('reads random rows as the driver reads their columns', async () => {
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const pick = <T>(values: T[]): T => values[Math.floor(random() * values.length)]!;
    const texts = ['', 'plain', 'quote " and \\ backslash', 'tab\tnew\nline', '\u0001 control', 'é ü ß', '😀 astral 𝄞', '{"looks":"like json"}', '1e400', 'null'];
    const docs = [null, {}, { a: 1, b: [1, 2.5, -3e-7, 'x'], c: { d: null, e: true } }, ['😀', { '': 'empty key' }], { big: 9007199254740991, small: -0.000001 }, 'a string', 12.5, { nested: { deeper: { deepest: texts } } }];
    const rows = Array.from({ length: 200 }, (_, i) => ({
      id: `row_${i}`,
      label: random() < 0.2 ? null : pick(texts),
      amount: Math.floor((random() - 0.5) * 2 * Number.MAX_SAFE_INTEGER),
      quantity: random() < 0.2 ? null : Math.floor((random() - 0.5) * 2 ** 31),
      flag: random() < 0.2 ? null : random() < 0.5,
      doc: pick(docs),
      // Year 1000 to 9999, pre-1970 included, to the millisecond.
      at: new Date(Math.floor(-3.02e13 + random() * (2.53e14 + 3.02e13))),
      maybe_at: random() < 0.3 ? null : new Date(Math.floor(random() * 4e12)),
    }));
    const db = test.database.db;
    for (const row of rows) await db('json_row_probe').insert({ ...row, doc: row.doc === null ? null : JSON.stringify(row.doc) });

    const byColumns = await runStatement<Record<string, unknown>>(db, `SELECT ${COLUMNS.join(', ')} FROM json_row_probe ORDER BY id`, []);
    const asJson = await runStatement<{ row: Record<string, unknown> }>(db, `SELECT ${jsonRowSql('p', COLUMNS, TIMESTAMPS)} AS row FROM json_row_probe p ORDER BY id`, []);
    expect(asJson).toHaveLength(rows.length);
    byColumns.forEach((columns, i) => {
      const expected = { ...columns, at: (columns.at as Date).getTime(), maybe_at: columns.maybe_at === null ? null : (columns.maybe_at as Date).getTime() };
      expect(asJson[i]!.row, String(columns.id)).toStrictEqual(expected);
    });
    // And both are what was written.
    const written = [...rows].sort((a, b) => (a.id < b.id ? -1 : 1));
    asJson.forEach(({ row }, i) => {
      const w = written[i]!;
      expect(row).toStrictEqual({ ...w, at: w.at.getTime(), maybe_at: w.maybe_at === null ? null : w.maybe_at.getTime() });
    });
  });

  it('refuses more columns than json_build_object takes', () => {
    expect(() => jsonRowSql('t', Array.from({ length: 51 }, (_, i) => `c${i}`), new Set())).toThrow(/at most 50/);
  });
});
