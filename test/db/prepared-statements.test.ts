/**
 * Hot statements marked PREPARED run as named statements on PostgreSQL (parsed and planned once
 * per pooled connection), can be turned off (DATABASE_PREPARED_STATEMENTS=false, for a pooler in
 * transaction mode without prepared statements), keep working when a migration adds a column under
 * a running process, and are plain statements on PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { PREPARED, openDatabase, runStatement, type Database } from '../../src/db/knex.js';
import { KnexOrgRepository, type ApiKeyWithHash, type Organization } from '../../src/orgs/orgs.repository.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

const org: Organization = {
  id: 'org_prepared',
  name: 'Prepared',
  displayName: null,
  frozen: false,
  cardVerified: true,
  cardAccountEnabled: true,
  stripeAccountId: null,
  stripeAccountBoundAt: null,
  stripeAccountState: null,
  branding: { logoUrl: null, accentColor: null },
  timeZone: 'UTC',
  createdAt: new Date('2026-01-01T00:00:00Z'),
  updatedAt: new Date('2026-01-01T00:00:00Z'),
};
const key: ApiKeyWithHash = {
  id: 'key_prepared',
  orgId: org.id,
  name: 'hot path',
  prefix: 'sk_test_prep',
  permissions: ['checkout:write'],
  createdAt: new Date('2026-01-02T00:00:00Z'),
  revokedAt: null,
  keyHash: 'a'.repeat(64),
};

let test: TestDatabase;
/** One connection, so the prepared statements seen are the ones the statements before made. */
let single: Database;

beforeAll(async () => {
  test = await freshDatabase();
  single = test.url ? await openDatabase({ databaseUrl: test.url, poolMax: 1 }) : test.database;
  const repo = new KnexOrgRepository(test.database.db);
  await repo.insertOrganization(org);
  await repo.insertApiKey(key);
});

afterAll(async () => {
  if (single !== test.database) await single.close();
  await test.drop();
});

const preparedTexts = async (database: Database): Promise<string[]> =>
  ((await database.db.raw('SELECT statement FROM pg_prepared_statements')).rows as Array<{ statement: string }>).map((r) => r.statement);

describe('prepared statements', () => {
  it('answer the same as plain ones, on either database', async () => {
    const result = await single.db.raw('SELECT ?::int + 1 AS n', [41]).options(PREPARED);
    expect(result.rows).toEqual([{ n: 42 }]);
    const found = await new KnexOrgRepository(single.db).findApiKeyByHash(key.keyHash);
    expect(found).toMatchObject({ id: key.id, orgId: org.id, permissions: ['checkout:write'], organization: { id: org.id, cardVerified: true } });
    expect(await new KnexOrgRepository(single.db).findApiKeyByHash('b'.repeat(64))).toBeUndefined();
    expect(await runStatement(single.db, 'SELECT $1::text AS t, $2::int AS n', ['x', 2])).toEqual([{ t: 'x', n: 2 }]);
  });

  it('run on the transaction\'s own connection when given a transaction', async () => {
    let inside: unknown;
    await single.db
      .transaction(async (trx) => {
        await trx('organizations').where({ id: org.id }).update({ name: 'Renamed inside' });
        inside = await runStatement(trx, 'SELECT name FROM organizations WHERE id = $1', [org.id]);
        throw new Error('roll back');
      })
      .catch(() => {});
    expect(inside).toEqual([{ name: 'Renamed inside' }]);
    expect(await runStatement(single.db, 'SELECT name FROM organizations WHERE id = $1', [org.id])).toEqual([{ name: 'Prepared' }]);
  });

  it('refuse a finished transaction (its connection is back in the pool)', async () => {
    let finished: Parameters<Parameters<typeof single.db.transaction>[0]>[0] | undefined;
    await single.db.transaction(async (trx) => {
      finished = trx;
    });
    await expect(runStatement(finished!, 'SELECT 1 AS one', [])).rejects.toThrow(/Transaction query already complete/);
  });

  it.runIf(!!process.env.TEST_DATABASE_URL)(skippedUnless('are named on PostgreSQL, only when marked', 'postgresOnly'), async () => {
    await single.db.raw('SELECT ?::int AS marked', [1]).options(PREPARED);
    await single.db.raw('SELECT ?::int AS unmarked', [1]);
    await new KnexOrgRepository(single.db).findApiKeyByHash(key.keyHash);
    const texts = await preparedTexts(single);
    expect(texts).toContain('SELECT $1::int AS marked');
    expect(texts.some((t) => t.includes('FROM api_keys k JOIN organizations o'))).toBe(true);
    expect(texts.some((t) => t.includes('unmarked'))).toBe(false);
    expect(await runStatement(single.db, 'SELECT $1::int AS direct', [7])).toEqual([{ direct: 7 }]);
    expect(await preparedTexts(single)).toContain('SELECT $1::int AS direct');
  });

  it.runIf(!!process.env.TEST_DATABASE_URL)(skippedUnless('are plain statements with DATABASE_PREPARED_STATEMENTS=false', 'postgresOnly'), async () => {
    const off = await openDatabase({ databaseUrl: test.url!, poolMax: 1, preparedStatements: false });
    try {
      expect((await off.db.raw('SELECT ?::int + 1 AS n', [1]).options(PREPARED)).rows).toEqual([{ n: 2 }]);
      expect(await new KnexOrgRepository(off.db).findApiKeyByHash(key.keyHash)).toMatchObject({ id: key.id });
      expect(await preparedTexts(off)).toEqual([]);
      expect(await runStatement(off.db, 'SELECT $1::int AS direct', [7])).toEqual([{ direct: 7 }]);
      expect(await preparedTexts(off)).toEqual([]);
    } finally {
      await off.close();
    }
  });

  it('keep answering after a migration adds columns under a running process', async () => {
    const repo = new KnexOrgRepository(single.db);
    expect(await repo.findApiKeyByHash(key.keyHash)).toMatchObject({ id: key.id });
    await test.database.db.raw('ALTER TABLE api_keys ADD COLUMN added_later text');
    await test.database.db.raw('ALTER TABLE organizations ADD COLUMN added_later text');
    try {
      const found = await repo.findApiKeyByHash(key.keyHash);
      expect(found).toMatchObject({ id: key.id, organization: { id: org.id } });
      expect(found).not.toHaveProperty('added_later');
    } finally {
      await test.database.db.raw('ALTER TABLE api_keys DROP COLUMN added_later');
      await test.database.db.raw('ALTER TABLE organizations DROP COLUMN added_later');
    }
  });
});
