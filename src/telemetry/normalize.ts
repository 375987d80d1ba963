/**
 * Turns a schema-valid ingest body into the rows we store, checking the rules the schema cannot
 * express (openapi/telemetry.yaml, `ingest`): times parse and end ≥ start, ids are not all
 * zeros, ids are unique per batch/trace, model-call attributes have their documented types. Maps
 * OpenTelemetry GenAI attributes onto `llm.*` and prices model calls that carry no cost.
 * Pure: no I/O, so the whole batch is checked before anything is written.
 */
import type { components } from '../../generated/telemetry.js';
import { AppError, type ErrorDetails } from '../kernel/errors.js';
import type { PriceTable } from './prices.js';

type IngestRequest = components['schemas']['IngestRequest'];
type IngestSpan = components['schemas']['IngestSpan'];
export type AttributeValue = components['schemas']['AttributeValue'];
export type Attributes = Record<string, AttributeValue>;
export type SpanStatusCode = 'OK' | 'ERROR' | 'UNSET';

export interface NormalizedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: string | null;
  startMs: number;
  endMs: number;
  statusCode: SpanStatusCode;
  statusMessage: string | null;
  attributes: Attributes;
  model: string | null;
  vendor: string | null;
  tokensInput: number | null;
  tokensOutput: number | null;
  cost: number | null;
  /** OTLP span events (prompts and completions among them); absent when the span has none. */
  events?: SpanEvent[];
}

export interface SpanEvent {
  name: string;
  /** Null when the event carries no time, or one outside the supported range. */
  timeMs: number | null;
  attributes: Attributes;
}

export interface NormalizedTrace {
  traceId: string;
  spans: NormalizedSpan[];
}

export interface NormalizedMetric {
  name: string;
  value: number;
  timestampMs: number;
  attributes: Attributes;
}

export interface NormalizedBatch {
  traces: NormalizedTrace[];
  metrics: NormalizedMetric[];
  spanCount: number;
}

export const invalidTrace = (message: string, details: ErrorDetails): AppError =>
  new AppError('VALIDATION_ERROR', message, { telemetryCode: 'invalid_trace', details });

const ALL_ZERO = /^0+$/;
const MAX_NAME = 200;

/**
 * Times outside 1970-01-01T00:00:00Z … 9999-12-31T23:59:59.999Z are refused: OTLP times are
 * unsigned nanoseconds since 1970, and past year 9999 an ISO string needs the extended ±YYYYYY
 * form, which neither RFC 3339 clients nor PostgreSQL read.
 */
const MAX_TIMESTAMP_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
export const TIMESTAMP_RANGE_MESSAGE = 'is outside the supported range 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z';
export const inTimestampRange = (ms: number): boolean => ms >= 0 && ms <= MAX_TIMESTAMP_MS;

/** RFC 3339 text → epoch ms (truncated to the millisecond), or NaN. */
export function parseTimestamp(text: string): number {
  // Date.parse accepts RFC 3339 with any fraction length but not a lowercase T/Z separator.
  return Date.parse(text.length > 10 && (text[10] === 't' || /z$/.test(text)) ? text.toUpperCase() : text);
}

const isNonNegativeInteger = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isNonNegativeNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isName = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= MAX_NAME;

/** Rounds a computed USD amount to 1e-12 so list prices do not show binary noise (0.0065000000000000004). */
const roundUsd = (v: number): number => Math.round(v * 1e12) / 1e12;

const MODEL_KEYS = [
  'llm.vendor', 'llm.model', 'llm.tokens.input', 'llm.tokens.output', 'llm.cost',
  'gen_ai.provider.name', 'gen_ai.system', 'gen_ai.response.model', 'gen_ai.request.model',
  'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens',
  // Older GenAI and OpenLLMetry (Traceloop) spellings.
  'gen_ai.usage.prompt_tokens', 'gen_ai.usage.completion_tokens', 'gen_ai.usage.total_tokens', 'llm.usage.total_tokens',
  'gen_ai.usage.cache_read_input_tokens', 'gen_ai.usage.cache_creation_input_tokens', 'gen_ai.usage.reasoning_tokens',
  'gen_ai.operation.name', 'llm.request.type',
];

/**
 * Token counts beyond input/output, mapped onto `llm.tokens.*` (first source present wins) and
 * checked like the others; they do not enter cost or the metrics, which count input and output.
 */
const EXTRA_TOKEN_KEYS: Array<[target: string, first: string, second?: string]> = [
  ['llm.tokens.total', 'gen_ai.usage.total_tokens', 'llm.usage.total_tokens'],
  ['llm.tokens.cache_read', 'gen_ai.usage.cache_read_input_tokens'],
  ['llm.tokens.cache_creation', 'gen_ai.usage.cache_creation_input_tokens'],
  ['llm.tokens.reasoning', 'gen_ai.usage.reasoning_tokens'],
];

/**
 * Prompt and completion text (`gen_ai.prompt.*`, `gen_ai.completion.*`, `gen_ai.input.messages`,
 * `gen_ai.output.messages`, `gen_ai.system_instructions`, and every string of a span event) is
 * kept up to this many characters; a longer value is cut and ends with TRUNCATED_MARK.
 */
export const CONTENT_CAP_CHARS = 16_384;
export const TRUNCATED_MARK = '…[truncated]';

export const isContentKey = (key: string): boolean =>
  key.startsWith('gen_ai.') &&
  (key.startsWith('gen_ai.prompt') ||
    key.startsWith('gen_ai.completion') ||
    key === 'gen_ai.input.messages' ||
    key === 'gen_ai.output.messages' ||
    key === 'gen_ai.system_instructions');

export const capContent = (value: string): string =>
  value.length <= CONTENT_CAP_CHARS ? value : value.slice(0, CONTENT_CAP_CHARS - TRUNCATED_MARK.length) + TRUNCATED_MARK;

/** Cuts over-long prompt/completion values in place. */
function capContentAttributes(attrs: Attributes): void {
  for (const key in attrs) {
    const value = attrs[key];
    if (typeof value === 'string' && value.length > CONTENT_CAP_CHARS && isContentKey(key)) attrs[key] = capContent(value);
  }
}

/** The key an llm.* value comes from: the llm.* key itself, else the first GenAI source present. */
function sourceKey(attrs: Attributes, target: string, first?: string, second?: string): string | undefined {
  if (attrs[target] !== undefined) return target;
  if (first !== undefined && attrs[first] !== undefined) return first;
  if (second !== undefined && attrs[second] !== undefined) return second;
  return undefined;
}

type Mapped =
  | { ok: true; attributes: Attributes; model: string | null; vendor: string | null; tokensInput: number | null; tokensOutput: number | null; cost: number | null }
  | { ok: false; field: string; message: string };

const NOT_A_MODEL_CALL = (attributes: Attributes): Mapped => ({ ok: true, attributes, model: null, vendor: null, tokensInput: null, tokensOutput: null, cost: null });

const bad = (key: string, what: string): Mapped => ({ ok: false, field: `attributes.${key}`, message: `${key} must be ${what}` });

/**
 * GenAI → llm.* mapping and type checks of the model-call attributes. Returns the attribute map
 * (extended in place with the mapped keys and a computed cost) and the extracted fields, or the
 * offending attribute. Written without closures or copies: it runs once per span of every batch.
 */
export function mapModelCall(input: Attributes, prices: PriceTable): Mapped {
  let relevant = false;
  for (const key in input) {
    if ((key.startsWith('llm.') || key.startsWith('gen_ai.')) && MODEL_KEYS.includes(key)) {
      relevant = true;
      break;
    }
  }
  if (!relevant) return NOT_A_MODEL_CALL(input);

  const vendorKey = sourceKey(input, 'llm.vendor', 'gen_ai.provider.name', 'gen_ai.system');
  const modelKey = sourceKey(input, 'llm.model', 'gen_ai.response.model', 'gen_ai.request.model');
  const inKey = sourceKey(input, 'llm.tokens.input', 'gen_ai.usage.input_tokens', 'gen_ai.usage.prompt_tokens');
  const outKey = sourceKey(input, 'llm.tokens.output', 'gen_ai.usage.output_tokens', 'gen_ai.usage.completion_tokens');
  const operationKey = sourceKey(input, 'llm.operation', 'gen_ai.operation.name', 'llm.request.type');
  const vendor = vendorKey ? input[vendorKey] : undefined;
  const model = modelKey ? input[modelKey] : undefined;
  const tokensInput = inKey ? input[inKey] : undefined;
  const tokensOutput = outKey ? input[outKey] : undefined;
  const cost = input['llm.cost'];
  if (vendorKey && !isName(vendor)) return bad(vendorKey, `a string of 1-${MAX_NAME} characters`);
  if (modelKey && !isName(model)) return bad(modelKey, `a string of 1-${MAX_NAME} characters`);
  if (inKey && !isNonNegativeInteger(tokensInput)) return bad(inKey, 'a non-negative integer');
  if (outKey && !isNonNegativeInteger(tokensOutput)) return bad(outKey, 'a non-negative integer');
  if (cost !== undefined && !isNonNegativeNumber(cost)) return bad('llm.cost', 'a non-negative number (USD)');
  if (operationKey && !isName(input[operationKey])) return bad(operationKey, `a string of 1-${MAX_NAME} characters`);
  for (const [target, first, second] of EXTRA_TOKEN_KEYS) {
    const key = sourceKey(input, target, first, second);
    if (key && !isNonNegativeInteger(input[key])) return bad(key, 'a non-negative integer');
  }

  // Mapped only when the llm.* key is absent; the original keys stay. The map is the request's
  // own (parsed for this request alone), so it is extended in place rather than copied.
  const attributes = input;
  if (vendorKey) attributes['llm.vendor'] = vendor!;
  if (modelKey) attributes['llm.model'] = model!;
  if (inKey) attributes['llm.tokens.input'] = tokensInput!;
  if (outKey) attributes['llm.tokens.output'] = tokensOutput!;
  if (operationKey) attributes['llm.operation'] = input[operationKey]!;
  for (const [target, first, second] of EXTRA_TOKEN_KEYS) {
    const key = sourceKey(input, target, first, second);
    if (key) attributes[target] = input[key]!;
  }
  let finalCost = cost === undefined ? null : (cost as number);
  if (modelKey && finalCost === null) {
    const computed = prices.cost(model as string, tokensInput as number | undefined, tokensOutput as number | undefined);
    if (computed !== undefined) {
      finalCost = roundUsd(computed);
      attributes['llm.cost'] = finalCost;
    }
  }
  return {
    ok: true,
    attributes,
    model: modelKey ? (model as string) : null,
    vendor: vendorKey ? (vendor as string) : null,
    tokensInput: inKey ? (tokensInput as number) : null,
    tokensOutput: outKey ? (tokensOutput as number) : null,
    cost: finalCost,
  };
}

/** Field names as the request spells them, for `details.field` and messages. */
export interface FieldNames {
  spanId: string;
  parentSpanId: string;
  startTime: string;
  endTime: string;
}
const NATIVE_NAMES: FieldNames = { spanId: 'span_id', parentSpanId: 'parent_span_id', startTime: 'start_time', endTime: 'end_time' };
export const OTLP_NAMES: FieldNames = { spanId: 'spanId', parentSpanId: 'parentSpanId', startTime: 'startTimeUnixNano', endTime: 'endTimeUnixNano' };

/** Where a span sits in the request: a native batch, or an OTLP request. Details are built only on failure. */
export type SpanAt =
  | { trace_index: number; span_index: number }
  | { resource_index: number; scope_index: number; span_index: number };

function spanError(traceId: string, span: SpanInput, at: SpanAt, field: string, message: string): AppError {
  if ('trace_index' in at) {
    return invalidTrace(`traces[${at.trace_index}].spans[${at.span_index}]: ${message}`, {
      trace_index: at.trace_index,
      trace_id: traceId,
      span_id: span.spanId,
      field,
    });
  }
  return invalidTrace(`resourceSpans[${at.resource_index}].scopeSpans[${at.scope_index}].spans[${at.span_index}]: ${message}`, {
    ...at,
    trace_id: traceId,
    span_id: span.spanId,
    field,
  });
}

export interface SpanInput {
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: string | null;
  /** Epoch ms, or NaN when the text did not parse. */
  startMs: number;
  endMs: number;
  statusCode: SpanStatusCode;
  statusMessage: string | null;
  attributes: Attributes;
}

/** Checks one span beyond the schema and builds its row. `at` locates it in the request for `details`. */
export function normalizeSpan(traceId: string, span: SpanInput, prices: PriceTable, at: SpanAt, names: FieldNames = NATIVE_NAMES): NormalizedSpan {
  if (ALL_ZERO.test(span.spanId)) throw spanError(traceId, span, at, names.spanId, `${names.spanId} must not be all zeros`);
  if (span.parentSpanId !== null) {
    if (ALL_ZERO.test(span.parentSpanId)) throw spanError(traceId, span, at, names.parentSpanId, `${names.parentSpanId} must not be all zeros`);
    if (span.parentSpanId === span.spanId) {
      throw spanError(traceId, span, at, names.parentSpanId, `${names.parentSpanId} must differ from ${names.spanId}`);
    }
  }
  if (Number.isNaN(span.startMs)) throw spanError(traceId, span, at, names.startTime, `${names.startTime} is not a valid timestamp`);
  if (Number.isNaN(span.endMs)) throw spanError(traceId, span, at, names.endTime, `${names.endTime} is not a valid timestamp`);
  if (!inTimestampRange(span.startMs)) throw spanError(traceId, span, at, names.startTime, `${names.startTime} ${TIMESTAMP_RANGE_MESSAGE}`);
  if (!inTimestampRange(span.endMs)) throw spanError(traceId, span, at, names.endTime, `${names.endTime} ${TIMESTAMP_RANGE_MESSAGE}`);
  if (span.endMs < span.startMs) throw spanError(traceId, span, at, names.endTime, `${names.endTime} is before ${names.startTime}`);
  capContentAttributes(span.attributes);
  const mapped = mapModelCall(span.attributes, prices);
  if (!mapped.ok) throw spanError(traceId, span, at, mapped.field, mapped.message);
  return {
    traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId,
    name: span.name,
    kind: span.kind,
    startMs: span.startMs,
    endMs: span.endMs,
    statusCode: span.statusCode,
    statusMessage: span.statusMessage,
    attributes: mapped.attributes,
    model: mapped.model,
    vendor: mapped.vendor,
    tokensInput: mapped.tokensInput,
    tokensOutput: mapped.tokensOutput,
    cost: mapped.cost,
  };
}

const EMPTY: Attributes = {};

function spanInput(span: IngestSpan): SpanInput {
  return {
    spanId: span.span_id,
    parentSpanId: span.parent_span_id ?? null,
    name: span.name,
    kind: span.kind ?? null,
    startMs: parseTimestamp(span.start_time),
    endMs: parseTimestamp(span.end_time),
    statusCode: span.status?.code ?? 'UNSET',
    statusMessage: span.status?.message ?? null,
    attributes: (span.attributes ?? EMPTY) as Attributes,
  };
}

/** The native `POST /v1/ingest` body. The first problem rejects the batch. */
export function normalizeIngest(body: IngestRequest, prices: PriceTable): NormalizedBatch {
  const traces: NormalizedTrace[] = [];
  const seenTraces = new Set<string>();
  let spanCount = 0;
  (body.traces ?? []).forEach((trace, traceIndex) => {
    const traceId = trace.trace_id;
    const traceWhere = { trace_index: traceIndex, trace_id: traceId, span_id: null };
    if (ALL_ZERO.test(traceId)) {
      throw invalidTrace(`traces[${traceIndex}]: trace_id must not be all zeros`, { ...traceWhere, field: 'trace_id' });
    }
    if (seenTraces.has(traceId)) {
      throw invalidTrace(`traces[${traceIndex}]: trace_id ${traceId} appears more than once in the batch`, { ...traceWhere, field: 'trace_id' });
    }
    seenTraces.add(traceId);
    const seenSpans = new Set<string>();
    const spans: NormalizedSpan[] = new Array(trace.spans.length);
    for (let spanIndex = 0; spanIndex < trace.spans.length; spanIndex++) {
      const span = trace.spans[spanIndex]!;
      if (seenSpans.has(span.span_id)) {
        throw invalidTrace(`traces[${traceIndex}].spans[${spanIndex}]: span_id ${span.span_id} appears more than once in the trace`, {
          trace_index: traceIndex,
          trace_id: traceId,
          span_id: span.span_id,
          field: 'span_id',
        });
      }
      seenSpans.add(span.span_id);
      spans[spanIndex] = normalizeSpan(traceId, spanInput(span), prices, { trace_index: traceIndex, span_index: spanIndex });
    }
    spanCount += spans.length;
    traces.push({ traceId, spans });
  });

  const metrics = (body.metrics ?? []).map((metric, metricIndex): NormalizedMetric => {
    const timestampMs = parseTimestamp(metric.timestamp);
    if (Number.isNaN(timestampMs) || !inTimestampRange(timestampMs)) {
      const problem = Number.isNaN(timestampMs) ? 'is not a valid timestamp' : TIMESTAMP_RANGE_MESSAGE;
      throw new AppError('VALIDATION_ERROR', `metrics[${metricIndex}]: timestamp ${problem}`, {
        details: { metric_index: metricIndex, field: 'timestamp' },
      });
    }
    return { name: metric.name, value: metric.value, timestampMs, attributes: (metric.attributes ?? EMPTY) as Attributes };
  });
  return { traces, metrics, spanCount };
}
