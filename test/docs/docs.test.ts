/**
 * The published contract: raw bundled documents on each listener, the /docs index and pages,
 * `npm run docs` output, and the reference's completeness (summary, description and examples
 * for every operation, request and response).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import express from 'express';
import supertest from 'supertest';
import YAML from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerDocsRoutes } from '../../src/docs/docs.js';
import { bundleDocument, listOperations, loadDocument, type DocumentName } from '../../src/http/spec.js';
import { createTestContext, type TestContext } from '../harness/context.js';

const run = promisify(execFile);
let ctx: TestContext;
let tmp: string;

beforeAll(async () => {
  ctx = await createTestContext();
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kassa-docs-'));
});
afterAll(async () => {
  await ctx?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe('raw documents at /openapi/<name>.yaml|json', () => {
  const cases: Array<[keyof TestContext['apps'], DocumentName]> = [
    ['merchant', 'merchant'],
    ['merchant', 'console'],
    ['platform', 'telemetry'],
    ['platform', 'agent-wallet'],
    ['admin', 'admin'],
  ];
  it.each(cases)('%s serves the bundled %s document as YAML and JSON', async (app, name) => {
    const agent = supertest(ctx.apps[app]);
    const yaml = await agent.get(`/openapi/${name}.yaml`);
    expect(yaml.status).toBe(200);
    expect(yaml.headers['content-type']).toMatch(/^application\/yaml/);
    const json = await agent.get(`/openapi/${name}.json`);
    expect(json.status).toBe(200);
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    const bundled = await bundleDocument(name);
    expect(json.body).toEqual(JSON.parse(JSON.stringify(bundled)));
    expect(YAML.parse(yaml.text)).toEqual(json.body);
    // Self-contained: no reference to another file survives bundling.
    expect(json.text).not.toMatch(/"\$ref":\s*"\.\//);
  });

  it('a listener serves only its own documents; unknown names fall through to the API 404', async () => {
    const other = await supertest(ctx.apps.merchant).get('/openapi/telemetry.json');
    expect(other.status).toBe(404);
    expect(other.body).toEqual({ success: false, message: 'Route not found', error: { code: 'NOT_FOUND', message: 'Route not found' } });
    expect((await supertest(ctx.apps.platform).get('/openapi/admin.yaml')).status).toBe(404);
    expect((await supertest(ctx.apps.merchant).get('/openapi/merchant.txt')).status).toBe(404);
  });
});

describe('/docs', () => {
  it('the merchant index links its reference and the platform listener’s, by their public URLs', async () => {
    const res = await supertest(ctx.apps.merchant).get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.text).toContain('href="/docs/merchant"');
    expect(res.text).toContain('href="/openapi/merchant.yaml"');
    expect(res.text).toContain('href="http://api.test/docs/telemetry"');
    expect(res.text).toContain('href="http://api.test/docs/agent-wallet"');
    expect(res.text).toContain('Kassa Merchant Commerce API');
  });

  it('the platform index links telemetry and agent wallet, and the merchant reference', async () => {
    const res = await supertest(ctx.apps.platform).get('/docs/');
    expect(res.status).toBe(200);
    expect(res.text).toContain('href="/docs/telemetry"');
    expect(res.text).toContain('href="/docs/agent-wallet"');
    expect(res.text).toContain('href="http://merchant.test/docs/merchant"');
  });

  it('serves the rendered page when built, and says how to build it when not', async () => {
    const app = express();
    const router = express.Router();
    registerDocsRoutes(router, { documents: ['merchant'], docsDir: tmp });
    app.use(router);
    const missing = await supertest(app).get('/docs/merchant');
    expect(missing.status).toBe(404);
    expect(missing.text).toContain('npm run docs');
    expect(missing.text).toContain('href="/openapi/merchant.yaml"');

    await writeFile(path.join(tmp, 'merchant.html'), '<!doctype html><title>rendered</title>');
    const built = await supertest(app).get('/docs/merchant.html');
    expect(built.status).toBe(200);
    expect(built.text).toBe('<!doctype html><title>rendered</title>');
    // A document this listener does not serve is not looked up on disk.
    expect((await supertest(app).get('/docs/admin')).status).toBe(404);
  });

  it('the index says the pages are not built until they are, then that they are rendered', async () => {
    const dir = path.join(tmp, 'index-state');
    await mkdir(dir, { recursive: true });
    const app = express();
    const router = express.Router();
    registerDocsRoutes(router, { documents: ['merchant'], docsDir: dir });
    app.use(router);
    const before = await supertest(app).get('/docs');
    expect(before.status).toBe(200);
    expect(before.text).not.toContain('Rendered from');
    expect(before.text).toContain('The reference pages are not built yet: run <code>npm run docs</code>');
    expect(before.text).toContain('(page not built)');

    // The same running listener notices the rendered page: the index is not cached from the first request.
    await writeFile(path.join(dir, 'merchant.html'), '<!doctype html><title>rendered</title>');
    const after = await supertest(app).get('/docs');
    expect(after.text).toContain('Rendered from the OpenAPI 3.1 documents in <code>openapi/</code>');
    expect(after.text).not.toContain('not built');
  });
});

describe('npm run docs', () => {
  it('renders a self-contained page with every operation, the bundled files and an index', async () => {
    const out = path.join(tmp, 'site');
    await run(process.execPath, ['--import', 'tsx', 'scripts/docs.ts', '--out', out, 'agent-wallet'], { cwd: process.cwd(), timeout: 120_000 });
    const html = await readFile(path.join(out, 'agent-wallet.html'), 'utf8');
    // Redoc's script is inlined: the page opens offline.
    expect(html).not.toMatch(/<script[^>]+src=/);
    expect(html).not.toMatch(/<link[^>]+href="https?:/);
    expect(html).not.toContain('cdn.redoc.ly'); // the attribution's logo is inlined (test/e2e/docs-offline.browser.test.ts loads it)
    expect(html).toContain('"disableTelemetry":true'); // no beacon to otel.cloud.redocly.com per reader
    const doc = await loadDocument('agent-wallet');
    for (const op of listOperations(doc)) expect(html).toContain(String(op.operation.summary));
    const index = await readFile(path.join(out, 'index.html'), 'utf8');
    expect(index).toContain('href="agent-wallet.html"');
    expect(index).toContain('href="openapi/agent-wallet.yaml"');
    expect(JSON.parse(await readFile(path.join(out, 'openapi', 'agent-wallet.json'), 'utf8'))).toEqual(
      JSON.parse(JSON.stringify(await bundleDocument('agent-wallet'))),
    );
  }, 180_000);
});

describe('the reference is complete', () => {
  const names: DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin'];
  const hasExample = (media: Record<string, unknown>) => media.example !== undefined || media.examples !== undefined;

  it.each(names)('%s: every operation has a summary, a description and examples for its body and every response', async (name) => {
    const doc = await loadDocument(name);
    const missing: string[] = [];
    for (const op of listOperations(doc)) {
      const o = op.operation as {
        summary?: string;
        description?: string;
        requestBody?: { content?: Record<string, Record<string, unknown>> };
        responses?: Record<string, { content?: Record<string, Record<string, unknown>> }>;
      };
      if (!o.summary?.trim()) missing.push(`${op.operationId}: summary`);
      if (!o.description?.trim()) missing.push(`${op.operationId}: description`);
      for (const [type, media] of Object.entries(o.requestBody?.content ?? {})) {
        if (!hasExample(media)) missing.push(`${op.operationId}: request ${type} example`);
      }
      for (const [status, response] of Object.entries(o.responses ?? {})) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          if (!hasExample(media)) missing.push(`${op.operationId}: ${status} ${type} example`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});
