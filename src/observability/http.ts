/**
 * The HTTP side of observability: the `GET /metrics` route, the small status listener a
 * `--role worker` process opens on its admin port (it has no API listener to carry `/metrics`),
 * and the ingest counters wrapped around the telemetry handlers.
 */
import express, { type Express, type Router } from 'express';
import type { TelemetryHandlers } from '../handler-maps.js';
import { constantTimeEqual } from '../kernel/secrets.js';
import type { Metrics } from './metrics.js';

export interface MetricsAccess {
  /**
   * Bearer token `/metrics` asks for (the admin token) when the listener is reachable beyond
   * loopback; unset → open, for a scraper on the same host or private network (docs/operations.md).
   */
  token?: string;
}

export function registerMetricsRoute(router: Router, metrics: Metrics, access: MetricsAccess = {}): void {
  router.get('/metrics', async (req, res, next) => {
    if (access.token !== undefined) {
      const match = /^Bearer (.+)$/.exec(req.header('authorization') ?? '');
      if (!match?.[1] || !constantTimeEqual(match[1], access.token)) {
        const message = 'Missing or invalid admin token: /metrics on an admin listener beyond loopback needs Authorization: Bearer <ADMIN_TOKEN>';
        res.status(401).set('WWW-Authenticate', 'Bearer').json({ success: false, message, error: { code: 'UNAUTHORIZED', message } });
        return;
      }
    }
    try {
      const { contentType, body } = await metrics.render();
      res.status(200).set('Content-Type', contentType).set('Cache-Control', 'no-store').send(body);
    } catch (err) {
      next(err);
    }
  });
}

/** `--role worker`: `/healthz`, `/readyz` (database reachable) and `/metrics`, nothing else. */
export function createWorkerStatusApp(metrics: Metrics, readiness: () => Promise<void>, access: MetricsAccess = {}): Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/healthz', (_req, res) => void res.json({ success: true, message: 'ok', data: { status: 'ok' } }));
  app.get('/readyz', async (_req, res) => {
    try {
      await readiness();
      res.json({ success: true, message: 'ready', data: { status: 'ready' } });
    } catch (err) {
      const message = err instanceof Error && err.message === 'Kassa is starting' ? err.message : 'Database unreachable';
      res.status(503).json({ success: false, message, error: { code: 'SERVICE_UNAVAILABLE', message } });
    }
  });
  const router = express.Router();
  registerMetricsRoute(router, metrics, access);
  app.use(router);
  app.use((_req, res) => void res.status(404).json({ success: false, message: 'Route not found', error: { code: 'NOT_FOUND', message: 'Route not found' } }));
  return app;
}

type OtlpBody = { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: unknown[] }> }> };

/** Counts what the ingest operations accepted (only successful answers count). */
export function countIngest(handlers: TelemetryHandlers, metrics: Metrics | undefined): TelemetryHandlers {
  if (!metrics) return handlers;
  return {
    ...handlers,
    ingest: async (input) => {
      const result = await handlers.ingest(input);
      if (result.status === 202) {
        const data = (result.body as { data: { traces_received: number; spans_received: number; metrics_received: number } }).data;
        metrics.telemetryIngested({ traces: data.traces_received, spans: data.spans_received, metrics: data.metrics_received });
      }
      return result;
    },
    ingestOtlpTraces: async (input) => {
      const result = await handlers.ingestOtlpTraces(input);
      if (result.status === 200) {
        const body = input.body as OtlpBody;
        let spans = 0;
        for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans += scope.spans?.length ?? 0;
        // Spans rejected one by one (OTLP partial success) were not ingested.
        spans -= Number(result.body.partialSuccess.rejectedSpans ?? 0);
        metrics.telemetryIngested({ spans });
      }
      return result;
    },
  };
}
