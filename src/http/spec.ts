/**
 * Loads the hand-written OpenAPI documents (with their ./components references) into plain
 * dereferenced objects for express-openapi-validator, and composes the document each app serves.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { $RefParser } from '@apidevtools/json-schema-ref-parser';

export const OPENAPI_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../openapi');
export type DocumentName = 'merchant' | 'telemetry' | 'agent-wallet' | 'admin' | 'console';

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

// The documents are plain JSON-schema-bearing objects; a loose type keeps this loader small.
export type OpenApiDocument = {
  openapi: string;
  info: Record<string, unknown>;
  servers?: unknown[];
  paths: Record<string, Record<string, unknown>>;
  components?: Record<string, Record<string, unknown>>;
  security?: Array<Record<string, string[]>>;
  [key: string]: unknown;
};

export interface OperationInfo {
  operationId: string;
  method: HttpMethod;
  /** OpenAPI path template, e.g. `/v1/orders/{id}`. */
  path: string;
  security: Array<Record<string, string[]>>;
  operation: Record<string, unknown>;
}

const cache = new Map<DocumentName, Promise<OpenApiDocument>>();

/** Dereferenced document (every $ref inlined); cached per process. */
export function loadDocument(name: DocumentName): Promise<OpenApiDocument> {
  let loaded = cache.get(name);
  if (!loaded) {
    loaded = $RefParser.dereference(path.join(OPENAPI_DIR, `${name}.yaml`)) as Promise<OpenApiDocument>;
    cache.set(name, loaded);
  }
  return loaded;
}

/** Bundled document (external files pulled in, internal $refs kept): what we publish. */
export async function bundleDocument(name: DocumentName): Promise<OpenApiDocument> {
  return (await $RefParser.bundle(path.join(OPENAPI_DIR, `${name}.yaml`))) as OpenApiDocument;
}

export function listOperations(doc: OpenApiDocument): OperationInfo[] {
  const out: OperationInfo[] = [];
  for (const [p, item] of Object.entries(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      const operation = item[method] as Record<string, unknown> | undefined;
      if (!operation) continue;
      out.push({
        operationId: String(operation.operationId),
        method,
        path: p,
        security: (operation.security as OperationInfo['security'] | undefined) ?? doc.security ?? [],
        operation,
      });
    }
  }
  return out;
}

/** Numbers the loaded documents, for the key of a composition. */
const documentNumbers = new WeakMap<OpenApiDocument, number>();
let nextDocumentNumber = 0;
const composed = new Map<string, OpenApiDocument>();

/**
 * Composes the document one listener validates against: the chosen operations of several
 * documents, with the servers reset to `/` (each listener serves its paths at its root). The same
 * composition (title, documents, operations) returns the same object, so what is built once per
 * document (its request and response validators) is built once per process, not once per app.
 */
export function composeDocument(
  title: string,
  parts: Array<{ doc: OpenApiDocument; include: (op: OperationInfo) => boolean }>,
): OpenApiDocument {
  const key = JSON.stringify([
    title,
    ...parts.map(({ doc, include }) => {
      let number = documentNumbers.get(doc);
      if (number === undefined) documentNumbers.set(doc, (number = nextDocumentNumber++));
      return [number, listOperations(doc).filter(include).map((op) => `${op.method} ${op.path}`)];
    }),
  ]);
  let document = composed.get(key);
  if (!document) composed.set(key, (document = composeFresh(title, parts)));
  return document;
}

function composeFresh(
  title: string,
  parts: Array<{ doc: OpenApiDocument; include: (op: OperationInfo) => boolean }>,
): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {};
  const securitySchemes: Record<string, unknown> = {};
  for (const { doc, include } of parts) {
    Object.assign(securitySchemes, doc.components?.securitySchemes ?? {});
    for (const op of listOperations(doc)) {
      if (!include(op)) continue;
      const item = (paths[op.path] ??= {});
      const { servers: _servers, ...operation } = op.operation;
      // Inline the effective security so the composed document needs no document-level default.
      item[op.method] = { ...operation, security: op.security };
      const pathParams = doc.paths[op.path]?.parameters;
      if (pathParams) item.parameters = pathParams;
    }
  }
  return {
    openapi: '3.1.0',
    info: { title, version: '1.0.0' },
    servers: [{ url: '/' }],
    paths,
    components: { securitySchemes },
  };
}
