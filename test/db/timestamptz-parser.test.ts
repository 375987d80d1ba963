/**
 * timestamptz values read through pg come out as the same Date (or ±Infinity) that pg's own
 * parser (postgres-date) makes: the plain form read from its digits, the rest by postgres-date.
 * On PostgreSQL, also what the server prints in several session time zones.
 */
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTimestamptz } from '../../src/db/knex.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

const parsePostgresDate = createRequire(createRequire(import.meta.url).resolve('pg-types'))('postgres-date') as (value: string) => Date | number | null;

const same = (text: string) => {
  const ours = parseTimestamptz(text);
  const theirs = parsePostgresDate(text);
  if (theirs instanceof Date) {
    expect(ours, text).toBeInstanceOf(Date);
    expect((ours as Date).getTime(), text).toBe(theirs.getTime());
  } else expect(ours, text).toBe(theirs);
};

describe('timestamptz parser', () => {
  it('reads every form PostgreSQL prints as postgres-date does', () => {
    for (const text of [
      '2026-11-26 07:36:12+00',
      '2026-11-26 07:36:12.1+00',
      '2026-11-26 07:36:12.123+00',
      '2026-11-26 07:36:12.123456+00',
      '2026-11-26 07:36:12.999999-08',
      '2026-11-26 07:36:12.5+05:30',
      '2026-11-26 07:36:12.5-09:30',
      '1969-12-31 23:59:59.5+00',
      '1000-01-01 00:00:00+00',
      '9999-12-31 23:59:59.999999+14',
      // postgres-date's own ground: years below 1000, BC, offsets with seconds, infinities.
      '0099-01-01 00:00:00+00',
      '0999-06-30 12:00:00+00',
      '2020-01-01 00:00:00+00 BC',
      '1900-01-01 00:00:00+00:19:32',
      '12021-01-01 00:00:00+00',
      'infinity',
      '-infinity',
    ]) {
      same(text);
    }
  });

  it('agrees with postgres-date on random instants, precisions and offsets', () => {
    let seed = 21;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 20_000; i++) {
      const iso = new Date(Math.floor(random() * 2.5e14) - 1e13).toISOString();
      const digits = Math.floor(random() * 7);
      const fraction = digits === 0 ? '' : `.${String(Math.floor(random() * 1e6)).padStart(6, '0').slice(0, digits)}`;
      const hours = Math.floor(random() * 28) - 13;
      const minutes = [0, 0, 30, 45][i % 4]!;
      const zone = `${hours < 0 ? '-' : '+'}${String(Math.abs(hours)).padStart(2, '0')}${minutes ? `:${minutes}` : ''}`;
      same(`${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction}${zone}`);
    }
  });
});

describe.runIf(process.env.TEST_DATABASE_URL)('timestamptz read from PostgreSQL', () => {
  let test: TestDatabase;
  beforeAll(async () => {
    test = await freshDatabase({ poolMax: 1 });
  });
  afterAll(async () => {
    await test.drop();
  });

  it('is the instant the server holds, in any session time zone', async () => {
    const { db } = test.database;
    for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham', 'Europe/Amsterdam']) {
      await db.raw(`SET TIME ZONE '${zone}'`);
      const { rows } = await db.raw(`SELECT t, (extract(epoch FROM t) * 1000)::float8 AS ms FROM (VALUES
        ('2026-11-26 07:36:12.123456+00'::timestamptz), ('1970-01-01 00:00:00+00'), ('1850-03-01 12:00:00+00'),
        ('2026-03-29 01:30:00.5+00'), ('0500-01-01 00:00:00+00')) AS v(t)`);
      for (const row of rows as Array<{ t: Date; ms: number }>) expect(row.t.getTime(), `${zone} ${row.ms}`).toBe(Math.floor(row.ms));
      const [infinite] = (await db.raw(`SELECT 'infinity'::timestamptz AS t`)).rows as Array<{ t: number }>;
      expect(infinite!.t).toBe(Infinity);
    }
    await db.raw(`SET TIME ZONE 'UTC'`);
  });
});
