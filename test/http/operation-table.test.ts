/**
 * The operation table that routes each request once (src/http/operation-table.ts) keeps Express's
 * routing rules, and the JSON writer of production answers (writeJson) sends what res.json sends.
 */
import express from 'express';
import supertest from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationTable } from '../../src/http/operation-table.js';
import { writeJson } from '../../src/http/openapi-app.js';
import { createTestContext, type TestContext } from '../harness/context.js';

describe('OperationTable', () => {
  const table = new OperationTable<string>();
  table.add('get', '/v1/products/search', 'searchProducts');
  table.add('get', '/v1/products/{id}', 'getProduct');
  table.add('post', '/v1/products/{id}/prices/{priceId}', 'updatePrice');

  it('tries operations in document order and decodes path parameters', () => {
    expect(table.find('GET', '/v1/products/search')).toEqual({ entry: 'searchProducts', params: {} });
    expect(table.find('GET', '/v1/products/PRD_1')).toEqual({ entry: 'getProduct', params: { id: 'PRD_1' } });
    expect(table.find('POST', '/v1/products/P%201/prices/%F0%9F%92%A5')).toEqual({ entry: 'updatePrice', params: { id: 'P 1', priceId: '💥' } });
  });

  it('matches as Express does: case-insensitive, an optional trailing slash, HEAD as GET, whole paths only', () => {
    expect(table.find('GET', '/V1/Products/PRD_1')?.entry).toBe('getProduct');
    expect(table.find('GET', '/v1/products/PRD_1/')?.entry).toBe('getProduct');
    expect(table.find('HEAD', '/v1/products/PRD_1')?.entry).toBe('getProduct');
    expect(table.find('GET', '/v1/products/PRD_1/prices')).toBeUndefined();
    expect(table.find('GET', '/v1/products')).toBeUndefined();
    expect(table.find('DELETE', '/v1/products/PRD_1')).toBeUndefined();
    expect(table.find('OPTIONS', '/v1/products/PRD_1')).toBeUndefined();
  });

  it('throws a 400 URIError, as the router does, for a segment that cannot be percent-decoded', () => {
    for (const bad of ['/v1/products/%E0%A4%A', '/v1/products/%', '/v1/products/%ED%A0%80']) {
      let thrown: unknown;
      try {
        table.find('GET', bad);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, bad).toBeInstanceOf(URIError);
      expect((thrown as { status?: number }).status).toBe(400);
    }
  });
});

describe('the merchant API routed through the table', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('answers a malformed escape in a path parameter with 400 VALIDATION_ERROR, not 500', async () => {
    const res = await ctx.merchant.get('/v1/checkout-sessions/%E0%A4%A').set('X-API-Key', ctx.orgA.apiKey);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      success: false,
      message: 'Malformed percent-encoding in the request path',
      error: { code: 'VALIDATION_ERROR', message: 'Malformed percent-encoding in the request path' },
    });
  });

  it('authenticates before anything else, and serves the same operation whatever the case of the path', async () => {
    const anonymous = await ctx.merchant.get('/v1/me');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('UNAUTHORIZED');
    const lower = await ctx.merchant.get('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
    const upper = await ctx.merchant.get('/V1/ME').set('X-API-Key', ctx.orgA.apiKey);
    expect(lower.status).toBe(200);
    expect(upper.status).toBe(200);
    expect(upper.body).toEqual(lower.body);
  });

  it('answers a method the path does not document, OPTIONS included, with 405 METHOD_NOT_ALLOWED in the envelope', async () => {
    // Express's router used to answer OPTIONS itself with a text/plain "GET, HEAD" 200.
    for (const method of ['options', 'delete', 'patch'] as const) {
      const res = await ctx.merchant[method]('/v1/me').set('X-API-Key', ctx.orgA.apiKey);
      expect(res.status, method).toBe(405);
      expect(res.body, method).toEqual({
        success: false,
        message: 'Method not allowed on this path',
        error: { code: 'METHOD_NOT_ALLOWED', message: 'Method not allowed on this path' },
      });
    }
  });

  it('still serves the pages outside the contract, and 404s an unknown path with the envelope', async () => {
    expect((await ctx.merchant.get('/healthz')).status).toBe(200);
    const unknown = await ctx.merchant.get('/v1/nothing-here').set('X-API-Key', ctx.orgA.apiKey);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
  });
});

describe('writeJson', () => {
  const body = { success: true, message: 'créé ✓', data: { id: 'CS_1', amount: 1500, note: null, tags: ['a', '💥'] } };
  const viaExpress = express().all('/', (_req, res) => void res.status(201).json(body));
  const viaWriter = express().all('/', (_req, res) => writeJson(res, 201, body));
  viaExpress.set('etag', false);
  viaWriter.set('etag', false);

  it('sends the same status, content headers and bytes as res.status().json()', async () => {
    const [a, b] = await Promise.all([supertest(viaExpress).post('/').buffer(true), supertest(viaWriter).post('/').buffer(true)]);
    expect(b.status).toBe(201);
    expect(b.headers['content-type']).toBe(a.headers['content-type']);
    expect(b.headers['content-length']).toBe(a.headers['content-length']);
    expect(b.text).toBe(a.text);
    expect(JSON.parse(b.text)).toEqual(body);
  });

  it('sends the headers without a body to a HEAD request, as res.json does', async () => {
    const [a, b] = await Promise.all([supertest(viaExpress).head('/'), supertest(viaWriter).head('/')]);
    expect(b.status).toBe(201);
    expect(b.headers['content-length']).toBe(a.headers['content-length']);
    expect(b.text ?? '').toBe('');
  });
});
