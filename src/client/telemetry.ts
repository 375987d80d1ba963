/**
 * Typed client of the telemetry API (openapi/telemetry.yaml) on `{api_url}`.
 *
 *   const telemetry = createTelemetryClient({ baseUrl: 'http://localhost:3001', apiKey: process.env.KASSA_TELEMETRY_KEY! });
 *   await telemetry.ingest({ traces: [...] });
 *   const { data, pagination } = await telemetry.listTraces({ limit: 20 });
 *
 * Methods return the whole JSON body (`data` plus `meta`, and `pagination` for trace lists),
 * since the cursor and the request id live beside `data` in this API. Error answers throw
 * KassaApiError with the telemetry `code` (`invalid_trace`, `quota_exceeded`, …) and `details`.
 * Reads are retried after timeouts, network errors, `429` and `503`; ingest is sent once
 * (metric points are appended, so a blind resend could count them twice).
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/telemetry.js';
import { apiErrorFrom } from './errors.js';
import { retryingFetch, type RetryOptions } from './transport.js';

type JsonBody<K extends keyof operations> = operations[K] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : never;
type Query<K extends keyof operations> = operations[K]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never;
type OkBody<K extends keyof operations> = operations[K]['responses'] extends Record<200, { content: { 'application/json': infer D } }>
  ? D
  : operations[K]['responses'] extends Record<201, { content: { 'application/json': infer D } }>
    ? D
    : operations[K]['responses'] extends Record<202, { content: { 'application/json': infer D } }>
      ? D
      : never;

export type TelemetrySchemas = components['schemas'];
export type IngestRequest = JsonBody<'ingest'>;
export type IngestResponse = OkBody<'ingest'>;
export type TelemetryProject = TelemetrySchemas['Project'];

export interface TelemetryClientOptions extends RetryOptions {
  /** The platform API's origin (`{api_url}`), e.g. `http://localhost:3001`. */
  baseUrl: string;
  /** A telemetry API key (`tk_…`), sent as `Authorization: Bearer`. */
  apiKey: string;
}

export interface TelemetryClient {
  readonly http: Client<paths>;
  listProjects(): Promise<OkBody<'listProjects'>>;
  createProject(body: JsonBody<'createProject'>): Promise<OkBody<'createProject'>>;
  getProject(projectId: string): Promise<OkBody<'getProject'>>;
  updateProject(projectId: string, body: JsonBody<'updateProject'>): Promise<OkBody<'updateProject'>>;
  deleteProject(projectId: string): Promise<OkBody<'deleteProject'>>;
  ingest(body: IngestRequest): Promise<IngestResponse>;
  listTraces(query?: Query<'listTraces'>): Promise<OkBody<'listTraces'>>;
  getTrace(traceId: string): Promise<OkBody<'getTrace'>>;
  getMetrics(query: Query<'getMetrics'>): Promise<OkBody<'getMetrics'>>;
}

type FetchResult = { data?: unknown; error?: unknown; response: Response };

async function body<T>(request: Promise<FetchResult>): Promise<T> {
  const { data, error, response } = await request;
  if (!response.ok) throw apiErrorFrom(response, error);
  return data as T;
}

export function createTelemetryClient(options: TelemetryClientOptions): TelemetryClient {
  if (!options.apiKey) throw new Error('createTelemetryClient: apiKey is required');
  const http = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: retryingFetch(options),
    headers: { Authorization: `Bearer ${options.apiKey}`, Accept: 'application/json' },
  });
  const project = (id: string) => ({ params: { path: { project_id: id } } });
  return {
    http,
    listProjects: () => body(http.GET('/v1/projects')),
    createProject: (json) => body(http.POST('/v1/projects', { body: json })),
    getProject: (id) => body(http.GET('/v1/projects/{project_id}', project(id))),
    updateProject: (id, json) => body(http.PATCH('/v1/projects/{project_id}', { ...project(id), body: json })),
    deleteProject: (id) => body(http.DELETE('/v1/projects/{project_id}', project(id))),
    ingest: (json) => body(http.POST('/v1/ingest', { body: json })),
    listTraces: (query) => body(http.GET('/v1/traces', { params: { query: query ?? {} } } as never)),
    getTrace: (traceId) => body(http.GET('/v1/traces/{trace_id}', { params: { path: { trace_id: traceId } } })),
    getMetrics: (query) => body(http.GET('/v1/metrics', { params: { query } })),
  };
}
