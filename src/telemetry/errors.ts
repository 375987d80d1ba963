/**
 * The telemetry API's codes for schema errors (openapi/telemetry.yaml): a problem inside
 * `traces[]` (or an OTLP span) is `invalid_trace` with its coordinates, inside `metrics[]` an
 * `invalid_request` with `metric_index`, with `metric`/`interval`/`aggregation` the matching
 * `invalid_*`; other 400s name their field. An unsupported content type is a 400 here, and a
 * body over the limit says the limit.
 */
import type { Request } from 'express';
import { AppError, type ErrorDetails } from '../kernel/errors.js';

interface ValidatorItem {
  path?: string;
  message?: string;
}

const QUERY_CODES = { metric: 'invalid_metric', interval: 'invalid_interval', aggregation: 'invalid_aggregation' } as const;

/** `/body/traces/0/spans/1/end_time` → ['body','traces','0','spans','1','end_time'] */
const segments = (path: string): string[] => path.split('/').filter((s) => s.length > 0);
const dotted = (parts: string[]): string => parts.join('.') || 'request';

function at(value: unknown, ...keys: Array<string | number>): unknown {
  let v = value;
  for (const k of keys) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[k];
  }
  return v;
}
const idAt = (value: unknown, ...keys: Array<string | number>): string | null => {
  const v = at(value, ...keys);
  return typeof v === 'string' ? v.toLowerCase() : null;
};

function describe(item: ValidatorItem, prefix: string, rest: string[]): string {
  return `${prefix}${rest.length ? `.${rest.join('.')}` : ''} ${item.message ?? 'is invalid'}`;
}

function refineValidation(error: AppError, items: ValidatorItem[], req: Request): AppError {
  const first = items[0];
  const parts = segments(first?.path ?? '');
  const [where, ...rest] = parts;
  const body = req.body as unknown;

  if (where === 'query' && rest.length > 0) {
    const field = rest[0]!;
    const code = req.path === '/v1/metrics' ? QUERY_CODES[field as keyof typeof QUERY_CODES] : undefined;
    const raw = req.query[field];
    const details: ErrorDetails = { field };
    if (code) details.value = typeof raw === 'string' ? raw : null;
    return new AppError('VALIDATION_ERROR', error.message, { telemetryCode: code, details });
  }

  if (where === 'body' && req.path === '/v1/ingest' && rest[0] === 'traces' && rest[1] !== undefined && /^\d+$/.test(rest[1])) {
    const traceIndex = Number(rest[1]);
    const inSpan = rest[2] === 'spans' && rest[3] !== undefined && /^\d+$/.test(rest[3]);
    const field = inSpan ? rest.slice(4) : rest.slice(2);
    const prefix = inSpan ? `traces[${traceIndex}].spans[${rest[3]}]` : `traces[${traceIndex}]`;
    return new AppError('VALIDATION_ERROR', describe(first!, prefix, field), {
      telemetryCode: 'invalid_trace',
      details: {
        trace_index: traceIndex,
        trace_id: idAt(body, 'traces', traceIndex, 'trace_id'),
        span_id: inSpan ? idAt(body, 'traces', traceIndex, 'spans', Number(rest[3]), 'span_id') : null,
        field: dotted(field.length ? field : ['spans']),
      },
    });
  }

  if (where === 'body' && req.path === '/v1/ingest' && rest[0] === 'metrics' && rest[1] !== undefined && /^\d+$/.test(rest[1])) {
    const metricIndex = Number(rest[1]);
    return new AppError('VALIDATION_ERROR', describe(first!, `metrics[${metricIndex}]`, rest.slice(2)), {
      details: { metric_index: metricIndex, field: dotted(rest.slice(2)) },
    });
  }

  if (
    where === 'body' &&
    req.path === '/v1/otlp/v1/traces' &&
    rest[0] === 'resourceSpans' &&
    rest[2] === 'scopeSpans' &&
    rest[4] === 'spans' &&
    rest[5] !== undefined &&
    /^\d+$/.test(rest[5])
  ) {
    const [r, s, k] = [Number(rest[1]), Number(rest[3]), Number(rest[5])];
    const field = rest.slice(6);
    const span = at(body, 'resourceSpans', r, 'scopeSpans', s, 'spans', k);
    return new AppError('VALIDATION_ERROR', describe(first!, `resourceSpans[${r}].scopeSpans[${s}].spans[${k}]`, field), {
      telemetryCode: 'invalid_trace',
      details: {
        resource_index: r,
        scope_index: s,
        span_index: k,
        trace_id: idAt(span, 'traceId'),
        span_id: idAt(span, 'spanId'),
        field: dotted(field.length ? field : ['span']),
      },
    });
  }

  if (where === 'body') return new AppError('VALIDATION_ERROR', error.message, { details: { field: dotted(rest.length ? rest : ['body']) } });
  if (where === 'path' && rest[0]) return new AppError('VALIDATION_ERROR', error.message, { details: { field: rest[0] } });
  return error;
}

export function refineTelemetryError(error: AppError, thrown: unknown, req: Request): AppError {
  if (error.code === 'UNSUPPORTED_MEDIA_TYPE') {
    const types = req.path === '/v1/otlp/v1/traces' ? 'application/x-protobuf or application/json' : 'application/json';
    return new AppError('VALIDATION_ERROR', `Request body must be sent as Content-Type: ${types}`, { details: { field: 'content-type' } });
  }
  if (error.code === 'PAYLOAD_TOO_LARGE' && error.options.details === undefined) {
    const limit = (thrown as { limit?: number } | undefined)?.limit;
    return new AppError('PAYLOAD_TOO_LARGE', limit ? `Request body exceeds ${limit} bytes` : error.message, {
      details: limit ? { limit_bytes: limit } : undefined,
    });
  }
  const items = (thrown as { errors?: unknown } | undefined)?.errors;
  if (error.code === 'VALIDATION_ERROR' && Array.isArray(items) && error.options.telemetryCode === undefined) {
    return refineValidation(error, items as ValidatorItem[], req);
  }
  return error;
}
