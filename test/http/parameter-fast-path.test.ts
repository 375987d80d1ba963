/**
 * Requests with only plain string parameters skip express-openapi-validator when they pass the
 * same checks (src/http/parameter-fast-path.ts). Every operation of the four documents that the
 * fast path covers is sent valid and invalid requests (lengths in code points, patterns, enums,
 * unknown, repeated and bracketed query parameters, integer parameters, defaults, HEAD, a body,
 * trailing slashes, percent-encoding) through two apps built from the same document, one with the
 * fast path and one without: status and body are the same, and so is what the handler was given.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import * as OpenApiValidator from 'express-openapi-validator';
import { createOpenApiApp, LOOKUP_STAGES, REQUEST_STAGES } from '../../src/http/openapi-app.js';
import { parameterFastPath } from '../../src/http/parameter-fast-path.js';
import { composeDocument, listOperations, loadDocument, type DocumentName, type OpenApiDocument, type OperationInfo } from '../../src/http/spec.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { skippedUnless } from '../harness/skip-reasons.js';

const DOCUMENTS: DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin'];
/** The reads `npm run bench:checkout` holds against its floor. */
const ISSUE_21_READS = ['getCheckoutSession', 'getOrder', 'listOrders', 'checkEntitlement'];

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: { type?: string; enum?: string[]; pattern?: string; minLength?: number; maxLength?: number; default?: unknown; format?: string };
}

function echoApp(doc: OpenApiDocument, fast: boolean, validateResponses = false) {
  const handlers = Object.fromEntries(
    listOperations(doc).map((op) => [
      op.operationId,
      async ({ query, params, req }: { query: unknown; params: unknown; req: { params: unknown; parametersChecked?: boolean } }) => ({
        status: 200,
        body: { query, params, reqParams: req.params, fast: req.parametersChecked === true },
      }),
    ]),
  );
  const schemes = Object.keys(doc.components?.securitySchemes ?? {});
  return supertest(
    createOpenApiApp({
      name: 'fast-path',
      document: doc,
      handlers,
      authenticators: Object.fromEntries(schemes.map((scheme) => [scheme, async () => undefined])),
      logger: createLogger({ level: 'silent' }),
      clock: new ManualClock(new Date('2026-11-22T09:00:00.000Z')),
      validateResponses,
      bodyLimit: () => 64 * 1024,
      errorFlavor: () => 'envelope',
      readiness: async () => {},
      parameterFastPath: fast,
    }),
  );
}

const resolve = (doc: OpenApiDocument, p: unknown): Parameter => {
  const ref = (p as { $ref?: string }).$ref;
  if (!ref) return p as Parameter;
  let node: unknown = doc;
  for (const part of ref.slice(2).split('/')) node = (node as Record<string, unknown>)[part];
  return node as Parameter;
};

function parametersOf(doc: OpenApiDocument, op: OperationInfo): Parameter[] {
  const item = doc.paths[op.path] as { parameters?: unknown[] };
  return [...(item.parameters ?? []), ...((op.operation.parameters as unknown[] | undefined) ?? [])].map((p) => resolve(doc, p));
}

/** A value that passes the schema, and values that fail it in each way it can. */
function values(p: Parameter): { good: string; bad: string[] } {
  const s = p.schema ?? {};
  if (s.enum) return { good: s.enum[0]!, bad: [`${s.enum[0]}x`, ''] };
  if (s.type === 'integer') return { good: '2', bad: ['0', '-1', 'x', '1.5', '99999999999'] };
  if (s.format === 'email') return { good: 'a@example.com', bad: ['not-an-email'] };
  if (s.format === 'date-time') return { good: '2026-11-22T09:00:00Z', bad: ['yesterday'] };
  if (s.type !== 'string') return { good: 'x', bad: [] };
  const candidates = ['ORD_abc', 'CS_abc', 'SUB_abc', 'CUS_abc', '0x' + 'a'.repeat(40), '0123456789abcdef'.repeat(2), '0123456789abcdef', 'abc', 'a b', 'é🎉', 'x'];
  const good = candidates.find((c) => (!s.pattern || new RegExp(s.pattern, 'u').test(c)) && [...c].length <= (s.maxLength ?? Infinity) && [...c].length >= (s.minLength ?? 0)) ?? 'x';
  const bad = [''];
  if (s.maxLength !== undefined) {
    bad.push('a'.repeat(s.maxLength + 1));
    // Code points, not UTF-16 units: maxLength emoji pass, one more does not.
    bad.push('🎉'.repeat(s.maxLength + 1));
  }
  if (s.pattern) bad.push('a b', '<x>', 'ü');
  return { good, bad };
}

interface Request {
  label: string;
  method: string;
  url: string;
  body?: object;
}

async function requestsFor(doc: OpenApiDocument, op: OperationInfo): Promise<Request[]> {
  const parameters = parametersOf(doc, op);
  const pathParams = parameters.filter((p) => p.in === 'path');
  const query = parameters.filter((p) => p.in === 'query');
  const good = (overrides: Record<string, string> = {}) =>
    op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(overrides[name] ?? values(pathParams.find((p) => p.name === name)!).good));
  const required = query.filter((p) => p.required).map((p) => `${p.name}=${encodeURIComponent(values(p).good)}`);
  const withQuery = (path: string, extra: string[]) => {
    const q = [...required, ...extra].join('&');
    return q ? `${path}?${q}` : path;
  };
  const method = op.method;
  const out: Request[] = [
    { label: 'plain', method, url: withQuery(good(), []) },
    { label: 'HEAD', method: 'head', url: withQuery(good(), []) },
    { label: 'trailing slash', method, url: withQuery(`${good()}/`, []) },
    { label: 'unknown query', method, url: withQuery(good(), ['nope=1']) },
    { label: 'empty query key', method, url: withQuery(good(), ['=1']) },
    { label: 'a body', method, url: withQuery(good(), []), body: { a: 1 } },
  ];
  for (const p of pathParams) {
    const { good: value, bad } = values(p);
    out.push({ label: `${p.name} upper case path`, method, url: withQuery(good({ [p.name]: value }).toUpperCase(), []) });
    for (const b of bad) out.push({ label: `path ${p.name}=${b}`, method, url: withQuery(good({ [p.name]: b }), []) });
    out.push({ label: `path ${p.name} malformed escape`, method, url: withQuery(good().replace(encodeURIComponent(value), '%E0%A4%A'), []) });
  }
  for (const p of query) {
    const { good: value, bad } = values(p);
    const others = required.filter((r) => !r.startsWith(`${p.name}=`));
    const q = (extra: string[]) => {
      const text = [...others, ...extra].join('&');
      return text ? `${good()}?${text}` : good();
    };
    out.push({ label: `query ${p.name} good`, method, url: q([`${p.name}=${encodeURIComponent(value)}`]) });
    out.push({ label: `query ${p.name} absent`, method, url: q([]) });
    out.push({ label: `query ${p.name} twice`, method, url: q([`${p.name}=${encodeURIComponent(value)}`, `${p.name}=${encodeURIComponent(value)}`]) });
    out.push({ label: `query ${p.name}[]`, method, url: q([`${p.name}[]=${encodeURIComponent(value)}`]) });
    out.push({ label: `query ${p.name}[k]`, method, url: q([`${p.name}[k]=${encodeURIComponent(value)}`]) });
    out.push({ label: `query ${p.name} plus-encoded`, method, url: q([`${p.name}=${encodeURIComponent(value).replace(/%20/g, '+')}`]) });
    for (const b of bad) out.push({ label: `query ${p.name}=${b}`, method, url: q([`${p.name}=${encodeURIComponent(b)}`]) });
  }
  return out;
}

const docs = new Map<DocumentName, OpenApiDocument>();

/** Echo apps only, no database: the PostgreSQL run would repeat it unchanged (not in database-free.json: the app module imports the metrics repository). */
const embeddedOnly = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  if (embeddedOnly) return;
  for (const name of DOCUMENTS) docs.set(name, composeDocument(name, [{ doc: await loadDocument(name), include: () => true }]));
});

describe.skipIf(embeddedOnly)(skippedUnless('parameter fast path', 'embeddedOnly'), () => {
  it('knows the validator stages it skips (a renamed stage would silently run again)', () => {
    const names = OpenApiValidator.middleware({
      apiSpec: { openapi: '3.0.3', info: { title: 't', version: '1' }, paths: {} } as never,
      validateRequests: true,
      validateResponses: true,
    }).map((m) => m.name);
    for (const name of [...REQUEST_STAGES, ...LOOKUP_STAGES]) expect(names).toContain(name);
  });

  it('covers the reads of issue 21, and only GET operations', () => {
    const merchant = docs.get('merchant')!;
    const byId = new Map(listOperations(merchant).map((op) => [op.operationId, op]));
    for (const id of ISSUE_21_READS) expect(parameterFastPath(merchant, byId.get(id)!), id).toBeDefined();
    for (const op of byId.values()) if (op.method !== 'get') expect(parameterFastPath(merchant, op), op.operationId).toBeUndefined();
  });

  it('leaves a missing required parameter, an empty value and the defaults, as the validator does', async () => {
    const doc = {
      openapi: '3.0.3',
      info: { title: 'synthetic', version: '1' },
      paths: {
        '/v1/things/{id}': {
          get: {
            operationId: 'getThing',
            parameters: [
              { name: 'id', in: 'path', required: true, schema: { type: 'string', maxLength: 8 } },
              { name: 'kind', in: 'query', required: true, schema: { type: 'string', enum: ['a', 'b'] } },
              { name: 'size', in: 'query', required: false, schema: { type: 'integer', minimum: 1, default: 20 } },
              { name: 'tag', in: 'query', required: false, schema: { type: 'string', default: 'none' } },
            ],
            responses: { '200': { description: 'ok' } },
          },
        },
      },
    } as unknown as OpenApiDocument;
    const fast = echoApp(doc, true);
    const slow = echoApp(doc, false);
    for (const url of ['/v1/things/x?kind=a', '/v1/things/x', '/v1/things/x?kind=c', '/v1/things/x?kind=a&tag=t', '/v1/things/x?kind=a&tag=', '/v1/things/x?kind=a&size=5', '/v1/things/123456789?kind=a']) {
      const [a, b] = [await fast.get(url), await slow.get(url)];
      if (a.status === 200) a.body.fast = false;
      expect({ status: a.status, body: a.body }, url).toEqual({ status: b.status, body: b.body });
    }
    expect((await fast.get('/v1/things/x?kind=a')).body).toEqual({ query: { kind: 'a', size: 20, tag: 'none' }, params: { id: 'x' }, reqParams: {}, fast: true });
  });

  // Response validation (on in the other tests) keeps the validator's route lookup: the merchant API is enough for that.
  for (const [validateResponses, documents] of [[false, DOCUMENTS], [true, ['merchant']]] as const) {
    it(`answers every request as the validator does (response validation ${validateResponses ? 'on' : 'off'})`, async () => {
      let taken = 0;
      for (const name of documents) {
        const doc = docs.get(name)!;
        const fast = echoApp(doc, true, validateResponses);
        const slow = echoApp(doc, false, validateResponses);
        for (const op of listOperations(doc)) {
          if (!parameterFastPath(doc, op)) continue;
          for (const r of await requestsFor(doc, op)) {
            const send = (app: ReturnType<typeof echoApp>) => {
              const req = (app as unknown as Record<string, (url: string) => supertest.Test>)[r.method]!(r.url);
              return r.body ? req.send(r.body) : req;
            };
            const [a, b] = [await send(fast), await send(slow)];
            const label = `${name} ${op.operationId} ${r.label}: ${r.method.toUpperCase()} ${r.url}`;
            // With response validation on, the echo answers fail it (500) on both apps: the response stage still runs.
            if (r.label === 'plain' && ISSUE_21_READS.includes(op.operationId)) expect(validateResponses ? a.status : a.body.fast, label).toBe(validateResponses ? 500 : true);
            if (a.body?.fast) taken++;
            expect(b.body?.fast ?? false, label).toBe(false);
            if (a.status === 200) a.body.fast = false;
            expect({ status: a.status, body: a.body }, label).toEqual({ status: b.status, body: b.body });
          }
        }
      }
      if (!validateResponses) expect(taken).toBeGreaterThan(20);
    });
  }
});
