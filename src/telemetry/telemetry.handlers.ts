/** Telemetry API handlers ({api_url}/v1/projects, traces, metrics, ingest, OTLP). */
import type { Clock } from '../kernel/clock.js';
import type { TelemetryHandlers } from '../handler-maps.js';
import { iso, isoFromMs } from '../kernel/present.js';
import type { IngestService } from './ingest.service.js';
import type { MetricsService } from './metrics.service.js';
import type { ModelPriceService } from './model-prices.service.js';
import type { PriceEntry } from './prices.js';
import type { SessionSummary, UserSummary } from './traces.repository.js';
import type { Attributes } from './normalize.js';
import type { Project } from './projects.repository.js';
import type { ProjectService, ProjectStats } from './projects.service.js';
import type { StoredSpan, StoredTrace } from './traces.repository.js';
import type { TraceService } from './traces.service.js';

export interface TelemetryServices {
  projects: ProjectService;
  prices: ModelPriceService;
  ingest: IngestService;
  traces: TraceService;
  metrics: MetricsService;
}

export const presentProject = (p: Project, stats?: ProjectStats) => ({
  id: p.id,
  name: p.name,
  slug: p.slug,
  environment: p.environment,
  description: p.description,
  settings: { sample_rate: p.sampleRate, data_retention_days: p.dataRetentionDays },
  ...(stats ? { stats: { traces_today: stats.tracesToday, traces_this_month: stats.tracesThisMonth } } : {}),
  created_at: iso(p.createdAt),
  updated_at: iso(p.updatedAt),
});

/** OpenLLMetry names a trace by its workflow (or entity) on the root span; else the root span's name. */
export const traceName = (rootName: string, rootAttributes: Attributes): string => {
  const workflow = rootAttributes['traceloop.workflow.name'] ?? rootAttributes['traceloop.entity.name'];
  return typeof workflow === 'string' && workflow.length > 0 ? workflow : rootName;
};

export const presentSummary = (t: StoredTrace) => ({
  trace_id: t.traceId,
  name: traceName(t.rootName, t.rootAttributes),
  start_time: iso(t.startTime),
  end_time: iso(t.endTime),
  duration_ms: t.durationMs,
  span_count: t.spanCount,
  root_span: { name: t.rootName, attributes: t.rootAttributes },
  llm_summary: { model: t.model, tokens_input: t.tokensInput, tokens_output: t.tokensOutput, cost: t.cost },
  status: t.hasError ? ('error' as const) : ('ok' as const),
  session_id: t.sessionId,
  user_id: t.userId,
});

const groupTotals = (g: SessionSummary | UserSummary) => ({
  trace_count: g.traceCount,
  first_start: iso(g.firstStart),
  last_end: iso(g.lastEnd),
  tokens_input: g.tokensInput,
  tokens_output: g.tokensOutput,
  cost: g.cost,
  error_count: g.errorCount,
});

export const presentSession = (g: SessionSummary) => ({ session_id: g.sessionId, user_id: g.userId, ...groupTotals(g) });
export const presentUser = (g: UserSummary) => ({ user_id: g.userId, session_count: g.sessionCount, ...groupTotals(g) });
export const presentPrice = (p: PriceEntry) => ({ model: p.model, input_per_million: p.input, output_per_million: p.output, source: p.source });
export const pagination = (page: { limit: number; hasMore: boolean; nextCursor: string | null }) => ({
  limit: page.limit,
  has_more: page.hasMore,
  next_cursor: page.nextCursor,
});

export const presentSpan = (s: StoredSpan) => ({
  span_id: s.spanId,
  parent_span_id: s.parentSpanId,
  name: s.name,
  start_time: isoFromMs(s.startMs),
  end_time: isoFromMs(s.endMs),
  duration_ms: s.endMs - s.startMs,
  attributes: s.attributes,
  status: s.statusMessage === null ? { code: s.statusCode } : { code: s.statusCode, message: s.statusMessage },
  ...(s.events
    ? { events: s.events.map((e) => ({ name: e.name, time: e.timeMs === null ? null : isoFromMs(e.timeMs), attributes: e.attributes })) }
    : {}),
});

const rejectionMessage = (count: number, first: string | null): string =>
  `${count} span${count === 1 ? '' : 's'} rejected${first ? `; first: ${first}` : ''}`;

export function createTelemetryHandlers(services: TelemetryServices, clock: Clock): TelemetryHandlers {
  const meta = (requestId: string) => ({ request_id: requestId, timestamp: clock.now().toISOString() });
  return {
    listProjects: async ({ auth, requestId }) => ({
      status: 200,
      body: { data: (await services.projects.list(auth.orgId)).map((p) => presentProject(p)), meta: meta(requestId) },
    }),
    createProject: async ({ auth, body, requestId }) => ({
      status: 201,
      body: { data: presentProject(await services.projects.create(auth.orgId, body)), meta: meta(requestId) },
    }),
    getProject: async ({ auth, params, requestId }) => {
      const { project, stats } = await services.projects.getWithStats(auth.orgId, params.project_id);
      return { status: 200, body: { data: presentProject(project, stats), meta: meta(requestId) } };
    },
    updateProject: async ({ auth, params, body, requestId }) => {
      const project = await services.projects.update(auth.orgId, params.project_id, {
        name: body.name,
        description: body.description,
        environment: body.environment,
        sampleRate: body.settings?.sample_rate,
        dataRetentionDays: body.settings?.data_retention_days,
      });
      return { status: 200, body: { data: presentProject(project), meta: meta(requestId) } };
    },
    deleteProject: async ({ auth, params, requestId }) => {
      await services.projects.delete(auth.orgId, params.project_id);
      return { status: 200, body: { data: { id: params.project_id, deleted: true as const }, meta: meta(requestId) } };
    },
    listTraces: async ({ auth, query, requestId }) => {
      const page = await services.traces.search(auth.projectId, query);
      return {
        status: 200,
        body: {
          data: page.traces.map(presentSummary),
          pagination: { limit: page.limit, has_more: page.hasMore, next_cursor: page.nextCursor },
          meta: meta(requestId),
        },
      };
    },
    listSessions: async ({ auth, query, requestId }) => {
      const page = await services.traces.sessions(auth.projectId, query);
      return { status: 200, body: { data: page.sessions.map(presentSession), pagination: pagination(page), meta: meta(requestId) } };
    },
    listUsers: async ({ auth, query, requestId }) => {
      const page = await services.traces.users(auth.projectId, query);
      return { status: 200, body: { data: page.users.map(presentUser), pagination: pagination(page), meta: meta(requestId) } };
    },
    listModelPrices: async ({ auth, params, requestId }) => ({
      status: 200,
      body: { data: (await services.prices.list(auth.orgId, params.project_id)).map(presentPrice), meta: meta(requestId) },
    }),
    setModelPrice: async ({ auth, params, body, requestId }) => {
      const price = await services.prices.set(auth.orgId, params.project_id, { model: body.model, input: body.input_per_million, output: body.output_per_million });
      return { status: 200, body: { data: presentPrice(price), meta: meta(requestId) } };
    },
    deleteModelPrice: async ({ auth, params, query, requestId }) => {
      await services.prices.delete(auth.orgId, params.project_id, query.model);
      return { status: 200, body: { data: { model: query.model, deleted: true as const }, meta: meta(requestId) } };
    },
    getTrace: async ({ auth, params, requestId }) => {
      const { trace, spans } = await services.traces.get(auth.projectId, params.trace_id);
      return {
        status: 200,
        body: {
          data: {
            trace_id: trace.traceId,
            name: traceName(trace.rootName, trace.rootAttributes),
            start_time: iso(trace.startTime),
            end_time: iso(trace.endTime),
            duration_ms: trace.durationMs,
            spans: spans.map(presentSpan),
          },
          meta: meta(requestId),
        },
      };
    },
    getMetrics: async ({ auth, query, requestId }) => ({
      status: 200,
      body: { data: await services.metrics.query(auth.orgId, query), meta: meta(requestId) },
    }),
    ingest: async ({ auth, body, requestId }) => {
      const counts = await services.ingest.ingest(auth, body);
      return {
        status: 202,
        body: {
          data: { traces_received: counts.tracesReceived, spans_received: counts.spansReceived, metrics_received: counts.metricsReceived },
          meta: meta(requestId),
        },
      };
    },
    ingestOtlpTraces: async ({ auth, body }) => {
      const { rejected } = await services.ingest.ingestOtlp(auth, body);
      const partialSuccess = rejected.count === 0 ? {} : { rejectedSpans: String(rejected.count), errorMessage: rejectionMessage(rejected.count, rejected.firstMessage) };
      return { status: 200, body: { partialSuccess } };
    },
  };
}
