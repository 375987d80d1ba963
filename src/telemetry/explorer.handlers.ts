/**
 * The console's telemetry operations (console.yaml, `/v1/console/telemetry-projects/{project_id}/…`):
 * the telemetry API's reads for one project of the session's organization, answered by the same
 * services and presenters as the telemetry API, in the console's envelope. The project is looked
 * up within the session's organization first: another organization's project is 404.
 */
import type { ConsoleExplorerHandlers } from '../handler-maps.js';
import type { MetricsService } from './metrics.service.js';
import type { ModelPriceService } from './model-prices.service.js';
import type { ProjectService } from './projects.service.js';
import { pagination, presentPrice, presentSession, presentSpan, presentSummary, presentUser, traceName } from './telemetry.handlers.js';
import type { TraceService } from './traces.service.js';

const ok = <T>(data: T) => ({ status: 200 as const, body: { success: true as const, message: 'OK', data } });

export function createTelemetryExplorerHandlers(services: {
  projects: ProjectService;
  traces: TraceService;
  metrics: MetricsService;
  prices: ModelPriceService;
}): ConsoleExplorerHandlers {
  /** The project's id once it is known to be the organization's (else 404). */
  const project = async (orgId: string, projectId: string): Promise<string> => (await services.projects.get(orgId, projectId)).id;
  return {
    listConsoleTelemetryTraces: async ({ auth, params, query }) => {
      const page = await services.traces.search(await project(auth.orgId, params.project_id), query);
      return ok({ items: page.traces.map(presentSummary), pagination: pagination(page) });
    },
    getConsoleTelemetryTrace: async ({ auth, params }) => {
      const { trace, spans } = await services.traces.get(await project(auth.orgId, params.project_id), params.trace_id);
      return ok({
        trace_id: trace.traceId,
        name: traceName(trace.rootName, trace.rootAttributes),
        start_time: trace.startTime.toISOString(),
        end_time: trace.endTime.toISOString(),
        duration_ms: trace.durationMs,
        spans: spans.map(presentSpan),
      });
    },
    listConsoleTelemetrySessions: async ({ auth, params, query }) => {
      const page = await services.traces.sessions(await project(auth.orgId, params.project_id), query);
      return ok({ items: page.sessions.map(presentSession), pagination: pagination(page) });
    },
    listConsoleTelemetryUsers: async ({ auth, params, query }) => {
      const page = await services.traces.users(await project(auth.orgId, params.project_id), query);
      return ok({ items: page.users.map(presentUser), pagination: pagination(page) });
    },
    getConsoleTelemetryMetrics: async ({ auth, params, query }) =>
      ok(await services.metrics.query(auth.orgId, { ...query, project_id: params.project_id })),
    listConsoleTelemetryModelPrices: async ({ auth, params }) => ok((await services.prices.list(auth.orgId, params.project_id)).map(presentPrice)),
    setConsoleTelemetryModelPrice: async ({ auth, params, body }) =>
      ok(presentPrice(await services.prices.set(auth.orgId, params.project_id, { model: body.model, input: body.input_per_million, output: body.output_per_million }))),
    deleteConsoleTelemetryModelPrice: async ({ auth, params, query }) => {
      await services.prices.delete(auth.orgId, params.project_id, query.model);
      return ok({ model: query.model, deleted: true as const });
    },
  };
}
