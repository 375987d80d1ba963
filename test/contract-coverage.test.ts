/**
 * The contract-coverage machinery: the listeners record `operationId status` when
 * KASSA_CONTRACT_LOG is set, and the report (npm run coverage:contract, run by CI after the suite)
 * marks every documented pair covered, allowed or missing and flags undocumented answers.
 */
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALLOWED_GAPS, buildReport, documentedPairs, observedPairs, type AllowedGap, type Pair } from '../scripts/contract-coverage.js';
import { contractRecorder } from '../src/http/contract-log.js';
import { createTestContext, type TestContext } from './harness/context.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kassa-contract-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('recording', () => {
  it('records nothing unless KASSA_CONTRACT_LOG is set', () => {
    expect(contractRecorder({})).toBeUndefined();
  });

  it('the listeners append one `operationId status` line per answer of an operation, and none for other routes or methods (HEAD)', async () => {
    const previous = process.env.KASSA_CONTRACT_LOG;
    process.env.KASSA_CONTRACT_LOG = dir;
    let ctx: TestContext | undefined;
    try {
      // Apps read the variable when they are built.
      ctx = await createTestContext();
      await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey).expect(200);
      await ctx.merchant.get('/v1/me').expect(401);
      await ctx.merchant.get('/v1/orders/ORD_000000000000000000000000').set('X-API-Key', ctx.orgA.apiKey).expect(404);
      await ctx.admin.get('/v1/orgs?zz=1').expect(400);
      await supertest(ctx.apps.platform).get('/healthz').expect(200);
      await ctx.merchant.get('/no/such/route').expect(404);
      // HEAD reaches GET /v1/me's route, but is not the documented operation: nothing recorded.
      await ctx.merchant.head('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    } finally {
      if (previous === undefined) delete process.env.KASSA_CONTRACT_LOG;
      else process.env.KASSA_CONTRACT_LOG = previous;
      await ctx?.close();
    }
    const files = await readdir(dir);
    expect(files).toEqual([`${process.pid}.log`]);
    const lines = (await readFile(path.join(dir, files[0]!), 'utf8')).trim().split('\n');
    expect(lines).toEqual(['getMe 200', 'getMe 401', 'getOrder 404', 'listOrgs 400']);
    const observed = await observedPairs(dir);
    expect(observed.get('getMe 401')).toBe(1);
  });
});

describe('the report', () => {
  const documented: Pair[] = [
    { document: 'merchant', operationId: 'getMe', status: 200 },
    { document: 'merchant', operationId: 'getMe', status: 401 },
    { document: 'merchant', operationId: 'getMe', status: 429 },
    { document: 'merchant', operationId: 'getOrder', status: 429 },
    { document: 'admin', operationId: 'listOrgs', status: 200 },
    { document: 'admin', operationId: 'listOrgs', status: 500 },
  ];
  const allowed: AllowedGap[] = [
    { document: 'merchant', operationId: '*', status: 429, until: 'issue 10', reason: 'rate limiting' },
    { document: 'admin', operationId: 'listOrgs', status: 200, until: 'never', reason: 'stale on purpose' },
  ];

  it('marks covered, allowed, missing, undocumented and stale pairs and prints the table', () => {
    const observed = new Map([
      ['getMe 200', 3],
      ['getMe 401', 1],
      ['getMe 418', 1],
      ['listOrgs 200', 2],
    ]);
    const report = buildReport(documented, observed, allowed);
    expect(report.covered.map((p) => `${p.operationId} ${p.status}`)).toEqual(['getMe 200', 'getMe 401', 'listOrgs 200']);
    expect(report.allowed.map((p) => `${p.operationId} ${p.status}`)).toEqual(['getMe 429', 'getOrder 429']);
    expect(report.missing.map((p) => `${p.operationId} ${p.status}`)).toEqual(['listOrgs 500']);
    expect(report.undocumented).toEqual(['getMe 418']);
    expect(report.stale).toEqual([allowed[1]]);
    expect(report.text).toMatch(/getMe\s+✓\s+✓\s+~/);
    expect(report.text).toContain('uncovered (allowed until issue 10): merchant * 429 — 2 pair(s); rate limiting');
    expect(report.text).toContain('MISSING: admin listOrgs 500');
    expect(report.text).toContain('UNDOCUMENTED: getMe 418');
    expect(report.text).toContain('contract coverage: 3/6 documented pairs exercised (50.0 %), 2 allowed gaps, 1 missing, 1 undocumented');
  });

  it('every allowed gap names a documented pair, the issue that closes it and why', async () => {
    const pairs = await documentedPairs();
    for (const gap of ALLOWED_GAPS) {
      expect(pairs.some((p) => p.document === gap.document && p.status === gap.status && (gap.operationId === '*' || p.operationId === gap.operationId)), JSON.stringify(gap)).toBe(true);
      expect(gap.until).toMatch(/\S/);
      expect(gap.reason).toMatch(/\S/);
    }
  });

  it('operation ids are unique across the four documents (the recorded lines name no document)', async () => {
    const pairs = await documentedPairs();
    const owner = new Map<string, string>();
    for (const p of pairs) {
      expect(owner.get(p.operationId) ?? p.document, p.operationId).toBe(p.document);
      owner.set(p.operationId, p.document);
    }
  });
});
