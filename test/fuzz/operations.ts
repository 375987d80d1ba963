/**
 * Every operation of the four documents with the listener that serves it and the error body it
 * speaks, plus a raw HTTP sender (node:http, so paths, query strings and bodies travel exactly as
 * built: no URL normalization, no re-serialization). Shared by the fuzz test and the contract
 * status sweep.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { listOperations, loadDocument, type DocumentName, type OperationInfo } from '../../src/http/spec.js';
import type { Schema } from './schema-arbitrary.js';

export type AppName = 'merchant' | 'platform' | 'admin';
export type Flavor = 'envelope' | 'telemetry';

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}

export interface ContractOperation extends OperationInfo {
  document: DocumentName;
  app: AppName;
  flavor: Flavor;
  parameters: Parameter[];
  /** JSON request body schema, when the operation takes one. */
  body?: { schema: Schema; required: boolean };
  statuses: number[];
}

export async function contractOperations(): Promise<ContractOperation[]> {
  const out: ContractOperation[] = [];
  for (const document of ['merchant', 'telemetry', 'agent-wallet', 'admin', 'console'] as const) {
    const doc = await loadDocument(document);
    for (const op of listOperations(doc)) {
      const o = op.operation as {
        parameters?: Parameter[];
        requestBody?: { required?: boolean; content?: Record<string, { schema: Schema }> };
        responses?: Record<string, unknown>;
      };
      const pathLevel = ((doc.paths[op.path] as { parameters?: Parameter[] }).parameters ?? []).filter(
        (p) => !(o.parameters ?? []).some((q) => q.name === p.name && q.in === p.in),
      );
      const json = o.requestBody?.content?.['application/json'];
      out.push({
        ...op,
        document,
        // The console document is served on the merchant listener.
        app: document === 'admin' ? 'admin' : (document === 'merchant' && op.operationId !== 'getWebhookSigningKey') || document === 'console' ? 'merchant' : 'platform',
        flavor: document === 'telemetry' ? 'telemetry' : 'envelope',
        parameters: [...pathLevel, ...(o.parameters ?? [])].filter((p) => p.in !== ('cookie' as string)),
        body: json ? { schema: json.schema, required: o.requestBody?.required ?? false } : undefined,
        statuses: Object.keys(o.responses ?? {}).map(Number).sort((a, b) => a - b),
      });
    }
  }
  return out;
}

export interface RawRequest {
  method: string;
  /** Path and query string, already encoded. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json: unknown;
}

export interface Listener {
  port: number;
  send(request: RawRequest): Promise<RawResponse>;
  close(): Promise<void>;
}

export async function listen(app: http.RequestListener): Promise<Listener> {
  const server = http.createServer(app);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  return {
    port,
    send: (request) =>
      new Promise((resolve, reject) => {
        const req = http.request(
          { host: '127.0.0.1', port, method: request.method, path: request.path, headers: request.headers, agent },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let json: unknown;
              try {
                json = text ? JSON.parse(text) : undefined;
              } catch {
                json = undefined;
              }
              resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(request.body);
      }),
    close: async () => {
      agent.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const ERROR_CODES = [
  'VALIDATION_ERROR', 'UNAUTHORIZED', 'FORBIDDEN', 'SECOND_FACTOR_REQUIRED', 'NOT_FOUND', 'METHOD_NOT_ALLOWED', 'CONFLICT', 'IDEMPOTENCY_KEY_REUSED',
  'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'RATE_LIMITED', 'INTERNAL_ERROR', 'NOT_IMPLEMENTED', 'SERVICE_UNAVAILABLE',
];

/** The error body of the operation's API, exactly: no extra member, no internals. */
export function expectErrorBody(flavor: Flavor, response: RawResponse, context: string): void {
  expect(response.headers['content-type'], context).toMatch(/^application\/json/);
  const body = response.json as Record<string, any>;
  if (flavor === 'telemetry') {
    expect(Object.keys(body ?? {}).sort(), context).toEqual(['error', 'meta']);
    expect(Object.keys(body.error).sort(), context).toEqual(['code', 'details', 'message']);
    expect(body.error.code, context).toMatch(/^[a-z_]+$/);
    expect(typeof body.error.message, context).toBe('string');
    expect(body.meta.request_id, context).toBe(response.headers['x-request-id']);
  } else {
    expect(Object.keys(body ?? {}).sort(), context).toEqual(['error', 'message', 'success']);
    expect(body.success, context).toBe(false);
    expect(ERROR_CODES, context).toContain(body.error.code);
    expect(Object.keys(body.error).sort(), context).toEqual(['code', 'message']);
    expect(body.message, context).toBe(body.error.message);
  }
  // Nothing from the inside leaks into a message: no stack frames, SQL or driver text.
  expect(response.text, context).not.toMatch(/\bat [\w.<>]+ \(|node_modules|relation "|syntax error at or near|\bknex\b|\bpglite\b/i);
}
