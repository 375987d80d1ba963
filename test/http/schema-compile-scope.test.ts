import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import supertest from 'supertest';
import { createOpenApiApp } from '../../src/http/openapi-app.js';
import { installSchemaCompileScope, schemaCompileScopeActive } from '../../src/http/schema-compile-scope.js';
import type { OpenApiDocument } from '../../src/http/spec.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';

type UseAjvCache = (ajv: unknown, schema: Record<string, unknown>, key: string) => (data: unknown) => boolean;

const requireFromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
/** Read at each call: the scope replaces the export. */
const useAjvCache = (): UseAjvCache => (requireFromValidator('./middlewares/util.js') as { useAjvCache: UseAjvCache }).useAjvCache;
const Ajv = (requireFromValidator('ajv') as { default: new (options: object) => unknown }).default;

/** A document shaped as the validator gets Kassa's: dereferenced, one operation answering `{ count }`. */
function countingDocument(): OpenApiDocument {
  const count = { type: 'object', required: ['count'], additionalProperties: false, properties: { count: { type: 'integer', minimum: 0 } } };
  return {
    openapi: '3.1.0',
    info: { title: 'count', version: '1' },
    paths: {
      '/v1/count': {
        post: {
          operationId: 'count',
          requestBody: { required: true, content: { 'application/json': { schema: count } } },
          responses: { '200': { description: 'The count', content: { 'application/json': { schema: count } } } },
        },
      },
    },
  };
}

function countingApp(answer: (sent: number) => unknown) {
  return supertest(
    createOpenApiApp({
      name: 'count',
      document: countingDocument(),
      handlers: { count: async ({ body }) => ({ status: 200, body: answer((body as { count: number }).count) }) },
      authenticators: {},
      logger: createLogger({ level: 'silent' }),
      clock: new ManualClock(new Date('2026-11-22T09:00:00.000Z')),
      validateResponses: true,
      bodyLimit: () => 64 * 1024,
      errorFlavor: () => 'envelope',
      readiness: async () => {},
    }),
  );
}

describe("the validator's schema compiles", () => {
  it('are installed where express-openapi-validator compiles, and leave the document out when it holds no $ref', () => {
    installSchemaCompileScope();
    // Fails when an upgrade of express-openapi-validator stops compiling through its util
    // module's export: check whether it still attaches the whole document to every schema.
    expect(schemaCompileScopeActive()).toBe(true);
    const ajv = new Ajv({ strict: false });
    const paths = { '/v1/count': { get: { responses: { '200': { description: 'ok' } } } } };
    const validate = useAjvCache()(ajv, { paths, components: {}, properties: { response: { type: 'integer' } } }, 'plain');
    expect(validate({ response: 1 })).toBe(true);
    expect(validate({ response: 'one' })).toBe(false);
  });

  it('still resolve a $ref into the attached components when the document holds one', () => {
    installSchemaCompileScope();
    const ajv = new Ajv({ strict: false });
    const components = { schemas: { Count: { type: 'integer', minimum: 0 } } };
    const validate = useAjvCache()(ajv, { paths: { '/v1/x': {} }, components, properties: { response: { $ref: '#/components/schemas/Count' } } }, 'with-ref');
    expect(validate({ response: 2 })).toBe(true);
    expect(validate({ response: -1 })).toBe(false);
  });

  it('still refuse a request and a response that do not match the document', async () => {
    const app = countingApp((sent) => ({ count: sent }));
    expect((await app.post('/v1/count').send({ count: 3 })).body).toEqual({ count: 3 });
    const refused = await app.post('/v1/count').send({ count: 'three' });
    expect(refused.status).toBe(400);
    const drifting = countingApp((sent) => ({ count: sent, extra: true }));
    expect((await drifting.post('/v1/count').send({ count: 3 })).status).toBe(500);
  });
});
