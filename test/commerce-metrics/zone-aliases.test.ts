/**
 * Commerce metrics read a zone under one spelling (issue 40): the organization's zone is stored in
 * the canonical spelling Intl gives (on Node 20 `Asia/Kolkata` → `Asia/Calcutta`), and a request
 * naming the zone under an alias or another letter case is read as that zone: the organization's
 * own (no kept zone recorded for it) or one kept zone under the canonical name. Migration 0461
 * removes kept zones recorded under other spellings. Both databases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createTestContext, type TestContext } from '../harness/context.js';
import { canonicalTimeZone } from '../../src/kernel/time-zone.js';
import * as m0461 from '../../src/db/migrations/0461_commerce_kept_zone_canonical_names.js';

let ctx: TestContext;
let db: Knex;

beforeAll(async () => {
  ctx = await createTestContext();
  db = ctx.testDb.database.db;
});
afterAll(async () => {
  await ctx?.close();
});

const keptZones = async (orgId: string) =>
  ((await db('commerce_rollup_kept_zone').where({ org_id: orgId }).orderBy('time_zone').select('time_zone')) as Array<{ time_zone: string }>).map((r) => r.time_zone);

describe('commerce metrics: time zone aliases', () => {
  it("reads the organization's zone asked under an alias as its own, and another zone's aliases as one kept zone", async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Zone aliases' });
    const settings = await ctx.services.orgs.updateSettings(org.id, { timeZone: 'Asia/Kolkata' });
    const own = canonicalTimeZone('Asia/Kolkata')!;
    expect(settings.timeZone).toBe(own);
    const key = (await ctx.services.orgs.createApiKey(org.id, { name: 'metrics' })).key;
    const ask = async (timeZone: string) => {
      const res = await ctx.merchant.get('/v1/metrics/commerce').query({ start_date: '2026-01-01', end_date: '2026-01-31', time_zone: timeZone }).set('X-API-Key', key);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data as { timeZone: string };
    };
    for (const alias of ['Asia/Kolkata', 'asia/kolkata', 'Asia/Calcutta']) expect((await ask(alias)).timeZone).toBe(own);
    // The organization's own zone is never kept a second time.
    expect(await keptZones(org.id)).toEqual([]);
    const other = canonicalTimeZone('Asia/Kathmandu')!;
    for (const alias of ['Asia/Kathmandu', 'Asia/Katmandu', 'ASIA/KATHMANDU']) expect((await ask(alias)).timeZone).toBe(other);
    expect(await keptZones(org.id)).toEqual([other]);
    // Unknown names are still refused.
    const res = await ctx.merchant.get('/v1/metrics/commerce').query({ start_date: '2026-01-01', end_date: '2026-01-31', time_zone: 'Asia/Atlantis' }).set('X-API-Key', key);
    expect(res.status).toBe(400);
    expect(res.body.error?.code ?? res.body.code).toBe('VALIDATION_ERROR');
  });

  it('migration 0461 removes kept zones recorded under another spelling, with their days', async () => {
    const org = await ctx.services.orgs.createOrganization({ name: 'Zone aliases, kept before' });
    const paris = canonicalTimeZone('europe/paris')!;
    const names = ['Asia/Kolkata', 'Asia/Calcutta', 'europe/paris', paris].filter((name, i, all) => all.indexOf(name) === i);
    for (const name of names) {
      await db('commerce_rollup_kept_zone').insert({ org_id: org.id, time_zone: name, state: 'ready', requested_at: new Date(), last_asked_on: '2026-12-01' });
      await db('commerce_rollup_zone_day').insert({ org_id: org.id, time_zone: name, day: '2026-12-01', currency: 'USD' });
    }
    await m0461.up(db);
    const expected = names.filter((name) => canonicalTimeZone(name) === name).sort();
    expect(expected).toContain(paris);
    expect(await keptZones(org.id)).toEqual(expected);
    const days = ((await db('commerce_rollup_zone_day').where({ org_id: org.id }).orderBy('time_zone').select('time_zone')) as Array<{ time_zone: string }>).map((r) => r.time_zone);
    expect(days).toEqual(expected);
  });
});
