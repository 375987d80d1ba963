/**
 * Query strings are read as HTML forms and URL libraries write them: `+` and `%20` are both a
 * space, `%2B` is a literal plus, every percent-encoded character is itself, and reserved characters
 * that need no encoding in a query (RFC 3986: `/`, `:`, `@`, `?`, `,`) may come as they are.
 *
 * The table is generated from the four OpenAPI documents: every string query parameter without an
 * enum, behind the real framework (parser, validator) of an app built from that document, whose
 * handlers answer with the query they were given. Then the same through the real apps.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { createMerchantClient } from '../../src/client/index.js';
import { createOpenApiApp } from '../../src/http/openapi-app.js';
import { composeDocument, listOperations, loadDocument, type DocumentName, type OpenApiDocument } from '../../src/http/spec.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { createProduct } from '../catalog/fixtures.js';
import { bearer, createProjectWithKey, span, traceId } from '../telemetry/helpers.js';

const DOCUMENTS: DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin'];

interface ParameterSchema {
  type?: string;
  enum?: unknown[];
  pattern?: string;
  format?: string;
  maxLength?: number;
}
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: ParameterSchema;
}

/** Values holding a space and the characters a query string gives a meaning to, tried in order until one fits the parameter's schema. */
const CANDIDATES: Record<string, string[]> = {
  text: ['R&D + QA #1/2=3 50% ?:@,', 'R&D+QA#1/2=3%?:@,', 'SUB_R&D+QA#1/2=3%?:@,'],
  email: ['r&d+qa#1/2=3@example.com'],
  'date-time': ['2026-11-22T09:00:00+01:00'],
  // A calendar date holds no reserved character.
  date: [],
};

/** String parameters that no value with a reserved character or a space can satisfy (hexadecimal addresses, transaction hashes and trace ids, dates, zone names, currency codes, CAIP-2 networks, project ids). */
const CANNOT_HOLD_RESERVED = [
  'merchant listOrders from_address',
  'merchant listOrders tx_hash',
  'merchant listCustomerBalanceTransactions currency',
  'merchant getCommerceMetrics start_date',
  'merchant getCommerceMetrics end_date',
  'merchant getCommerceMetrics time_zone',
  'merchant getCommerceMetrics currency',
  'merchant checkEntitlement wallet',
  'merchant getX402Settlement network',
  'merchant getX402Settlement asset',
  'merchant getX402Settlement payer',
  'merchant getX402Settlement nonce',
  'telemetry listTraces trace_id',
  'telemetry getMetrics project_id',
  'admin listOrgOrders from_address',
  'admin listOrgOrders tx_hash',
];

/** Bodies for operations that require one (the query is what is tested). */
const BODIES: Record<string, unknown> = { updateWebhookEndpointByQuery: { enabled: false } };

function sampleFor(schema: ParameterSchema): string | undefined {
  const candidates = CANDIDATES[schema.format ?? 'text'];
  if (!candidates) throw new Error(`no sample for format ${schema.format}: add one to CANDIDATES`);
  return candidates.find((c) => (!schema.pattern || new RegExp(schema.pattern, 'u').test(c)) && c.length <= (schema.maxLength ?? Infinity));
}

/** A value that passes validation, for the other parameters an operation requires. */
function plainValue(p: Parameter): string {
  const s = p.schema ?? {};
  if (s.enum) return String(s.enum[0]);
  if (s.type === 'integer' || s.type === 'number') return '1';
  if (s.format === 'date') return '2026-11-22';
  return sampleFor(s) ?? 'x';
}

interface Case {
  label: string;
  document: DocumentName;
  operationId: string;
  method: string;
  path: string;
  name: string;
  sample: string;
  /** Other required query parameters, already encoded. */
  rest: string;
}

async function cases(): Promise<{ cases: Case[]; cannotHoldReserved: string[] }> {
  const out: Case[] = [];
  const cannotHoldReserved: string[] = [];
  for (const document of DOCUMENTS) {
    const doc = await loadDocument(document);
    for (const op of listOperations(doc)) {
      const item = doc.paths[op.path] as { parameters?: Parameter[] };
      const parameters = [...(item.parameters ?? []), ...((op.operation.parameters as Parameter[] | undefined) ?? [])];
      const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(plainValue(parameters.find((p) => p.in === 'path' && p.name === name)!)));
      for (const p of parameters) {
        if (p.in !== 'query' || p.schema?.type !== 'string' || p.schema.enum) continue;
        const label = `${document} ${op.operationId} ${p.name}`;
        const sample = sampleFor(p.schema);
        if (sample === undefined) {
          cannotHoldReserved.push(label);
          continue;
        }
        const rest = parameters
          .filter((o) => o.in === 'query' && o.required && o.name !== p.name)
          .map((o) => `${o.name}=${encodeURIComponent(plainValue(o))}`)
          .join('&');
        out.push({ label, document, operationId: op.operationId, method: op.method, path, name: p.name, sample, rest });
      }
    }
  }
  return { cases: out, cannotHoldReserved };
}

/** The real framework over a document, with handlers that answer with the query they received. */
async function echoApp(document: DocumentName) {
  const doc = composeDocument(document, [{ doc: await loadDocument(document), include: () => true }]);
  const handlers = Object.fromEntries(listOperations(doc).map((op) => [op.operationId, async ({ query }: { query: unknown }) => ({ status: 200, body: { query } })]));
  const schemes = Object.keys((doc as OpenApiDocument).components?.securitySchemes ?? {});
  return supertest(
    createOpenApiApp({
      name: document,
      document: doc,
      handlers,
      authenticators: Object.fromEntries(schemes.map((scheme) => [scheme, async () => undefined])),
      logger: createLogger({ level: 'silent' }),
      clock: new ManualClock(new Date('2026-11-22T09:00:00.000Z')),
      validateResponses: false,
      bodyLimit: () => 64 * 1024,
      errorFlavor: () => 'envelope',
      readiness: async () => {},
    }),
  );
}

const { cases: CASES, cannotHoldReserved } = await cases();
const apps = new Map<DocumentName, supertest.Agent>();

beforeAll(async () => {
  for (const document of DOCUMENTS) apps.set(document, (await echoApp(document)) as unknown as supertest.Agent);
});

async function send(c: Case, encoded: string) {
  const query = [c.rest, `${c.name}=${encoded}`].filter(Boolean).join('&');
  const app = apps.get(c.document)!;
  const req = (app as unknown as Record<string, (url: string) => supertest.Test>)[c.method]!(`${c.path}?${query}`);
  return BODIES[c.operationId] ? req.send(BODIES[c.operationId] as object) : req;
}

/** Form encoding, as HTML forms, URLSearchParams and Python's requests write it: space → `+`, `+` → `%2B`. */
const formEncoded = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);
/** Percent-encoding, as encodeURIComponent writes it: space → `%20`. */
const percentEncoded = (value: string) => encodeURIComponent(value);
/** Percent-encoding where RFC 3986 requires it in a query, the other reserved characters left as they are. */
const minimallyEncoded = (value: string) => percentEncoded(value).replace(/%2F/g, '/').replace(/%3A/g, ':').replace(/%40/g, '@').replace(/%3F/g, '?').replace(/%2C/g, ',');

describe('free-text query parameters of the four documents', () => {
  it('are published without allowReserved: clients percent-encode reserved characters, a plus included', async () => {
    for (const document of DOCUMENTS) {
      const doc = await loadDocument(document);
      for (const op of listOperations(doc)) {
        const item = doc.paths[op.path] as { parameters?: Array<Parameter & { allowReserved?: boolean }> };
        for (const p of [...(item.parameters ?? []), ...((op.operation.parameters as typeof item.parameters) ?? [])]) {
          expect(p.allowReserved, `${document} ${op.operationId} ${p.name}`).toBeUndefined();
        }
      }
    }
  });

  it('are found in the documents (the table is not empty), and those that cannot hold a reserved character are known', () => {
    expect(CASES.map((c) => c.label)).toEqual(expect.arrayContaining(['merchant listProductsDeprecated search', 'admin listOrgProducts search', 'telemetry listTraces model', 'merchant listCustomers email']));
    expect(cannotHoldReserved, JSON.stringify(cannotHoldReserved)).toEqual(CANNOT_HOLD_RESERVED);
  });

  it.each(CASES)('$label: form and percent encodings read the same, encoded reserved characters as themselves', async (c) => {
    for (const [encoding, encoded] of [
      ['form', formEncoded(c.sample)],
      ['percent', percentEncoded(c.sample)],
      ['minimal', minimallyEncoded(c.sample)],
    ] as const) {
      const res = await send(c, encoded);
      expect(res.body, `${encoding}: ${encoded}`).toEqual({ query: expect.objectContaining({ [c.name]: c.sample }) });
      expect(res.status).toBe(200);
    }
    if (c.sample.includes(' ')) {
      // `+` and `%20` side by side, and `%2B` next to them.
      const res = await send(c, 'a+b%20c%2Bd');
      expect(res.body.query[c.name]).toBe('a b c+d');
    } else {
      // The parameter cannot hold a space, so a raw `+` (a space) is refused with a clear 400.
      const res = await send(c, c.sample.includes('+') ? percentEncoded(c.sample).replace('%2B', '+') : `${percentEncoded(c.sample)}+`);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_ERROR', message: expect.stringContaining(`query.${c.name}`) } });
    }
  });
});

describe('through the real apps', () => {
  let ctx: TestContext;
  let realClient: { productId: string };
  let reserved: { productId: string };
  beforeAll(async () => {
    ctx = await createTestContext();
    realClient = await createProduct(ctx, ctx.orgA.orgId, { name: 'Real client' });
    reserved = await createProduct(ctx, ctx.orgA.orgId, { name: 'R&D + QA #1/2' });
    await createProduct(ctx, ctx.orgA.orgId, { name: 'Realclient (no space)' });
  });
  afterAll(async () => {
    await ctx?.close();
  });
  const ids = (res: { body: any }) => res.body.data.records.map((p: any) => p.productId);

  it('answers the Python SDK’s product search (search=Real+client) like search=Real%20client', async () => {
    for (const path of ['/v1/products', '/v1/product']) {
      const form = await ctx.merchant.get(`${path}?search=Real+client&status=PUBLISHED&page=1&size=20`).set('X-API-Key', ctx.orgA.apiKey);
      expect(form.status, form.text).toBe(200);
      expect(ids(form)).toEqual([realClient.productId]);
      const percent = await ctx.merchant.get(`${path}?search=Real%20client&status=PUBLISHED&page=1&size=20`).set('X-API-Key', ctx.orgA.apiKey);
      expect(percent.body).toEqual(form.body);
    }
  });

  it('searches over real HTTP as a form encoder (Python requests, URLSearchParams) and the TypeScript SDK send it', async () => {
    const server: Server = ctx.apps.merchant.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const query = new URLSearchParams({ search: 'R&D + QA #1/2', status: 'PUBLISHED', page: '1', size: '20' });
      expect(query.toString()).toBe('search=R%26D+%2B+QA+%231%2F2&status=PUBLISHED&page=1&size=20');
      const res = await fetch(`${baseUrl}/v1/products?${query}`, { headers: { 'X-API-Key': ctx.orgA.apiKey } });
      expect(res.status).toBe(200);
      expect(ids({ body: await res.json() })).toEqual([reserved.productId]);
      const sdk = createMerchantClient({ baseUrl, apiKey: ctx.orgA.apiKey });
      expect((await sdk.listProducts({ search: 'R&D + QA #1/2' })).records.map((p) => p.productId)).toEqual([reserved.productId]);
      expect((await sdk.listProducts({ search: 'real client' })).records.map((p) => p.productId)).toEqual([realClient.productId]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('reads %26, %2B, %23 and %2F as the characters themselves (merchant and admin product search)', async () => {
    const merchant = await ctx.merchant.get('/v1/product?search=R%26D+%2B+QA+%231%2F2').set('X-API-Key', ctx.orgA.apiKey);
    expect(ids(merchant)).toEqual([reserved.productId]);
    // A raw + is a space: "R&D   QA" is not in any name.
    expect(ids(await ctx.merchant.get('/v1/product?search=R%26D+++QA').set('X-API-Key', ctx.orgA.apiKey))).toEqual([]);
    const admin = await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/products?search=R%26D%20%2B%20QA%20%231/2`);
    expect(admin.status).toBe(200);
    expect(ids(admin)).toEqual([reserved.productId]);
    expect(ids(await ctx.admin.get(`/v1/orgs/${ctx.orgA.orgId}/products?search=real+client`))).toEqual([realClient.productId]);
  });

  it('filters traces by a model name with a space, a plus and a slash (telemetry)', async () => {
    const project = await createProjectWithKey(ctx, ctx.orgA.orgId);
    const model = 'acme/llm 3+ R&D';
    const start = ctx.clock.now().getTime() - 60_000;
    const tid = traceId();
    const root = span({ start, durationMs: 100 });
    const ingest = await ctx.platform
      .post('/v1/ingest')
      .set(bearer(project.key))
      .send({ traces: [{ trace_id: tid, spans: [root, span({ parent_span_id: root.span_id, start: start + 1, durationMs: 5, attributes: { 'llm.model': model } })] }] });
    expect(ingest.status).toBe(202);
    for (const encoded of [formEncoded(model), percentEncoded(model), minimallyEncoded(model)]) {
      const res = await ctx.platform.get(`/v1/traces?model=${encoded}`).set(bearer(project.key));
      expect(res.status, encoded).toBe(200);
      expect(res.body.data.map((t: { trace_id: string }) => t.trace_id)).toEqual([tid]);
    }
  });
});
