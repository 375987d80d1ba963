/**
 * Ingest: validates and maps a batch (normalize.ts), samples it by trace id, and stores it in one
 * transaction — new traces, extended traces (spans merged by span id, summary recomputed), their
 * sessions' and users' totals, model calls, metric rollups, metric points and the monthly quota —
 * so a batch is stored whole or not at all.
 *
 * Rollups are maintained incrementally: the model-call spans that are new to the store are merged
 * into their ten-second, minute, five-minute, hour and day cells under a per-cell advisory lock.
 * A re-sent span replaces the stored one, and its old contribution cannot be subtracted from
 * min/max, so the minutes it touches (old and new position) are recomputed from the raw spans
 * (with their ten-second cells) and their five-minute cells, hours and days re-merged from the
 * finer cells — the rare path, and an exact one.
 */
import type { Clock } from '../kernel/clock.js';
import { AppError, notFound } from '../kernel/errors.js';
import type { components } from '../../generated/telemetry.js';
import { CellStats } from './cell-stats.js';
import type { TelemetryAuth } from './keys.service.js';
import { normalizeIngest, type NormalizedBatch, type NormalizedSpan, type NormalizedTrace } from './normalize.js';
import { normalizeOtlp, type OtlpRejections } from './otlp.js';
import type { PriceTable } from './prices.js';
import type { Project, ProjectRepository } from './projects.repository.js';
import { startOfNextUtcMonth, startOfUtcMonth } from './projects.service.js';
import type { IngestTx, IngestUnitOfWork } from './ingest.repository.js';
import { RESOLUTION_MS, cellLockKey, floorTo, vendorKey, type Resolution } from './rollups.js';
import type { CellKey, CellRow, ModelCallRow } from './rollups.repository.js';
import { keepTrace, samplingThreshold } from './sampling.js';
import type { Cell } from './span-meters.repository.js';
import { ConcurrentInsertError, type StoredSpan, type TraceChange, type TraceSummary, type TraceWrite } from './traces.repository.js';

type IngestRequest = components['schemas']['IngestRequest'];
type OtlpRequest = components['schemas']['OtlpExportTraceServiceRequest'];

/** After a batch meets stored traces, this many of the project's next batches look them up first. */
const LOOKUP_FIRST_BATCHES = 20;

export interface IngestCounts {
  tracesReceived: number;
  spansReceived: number;
  metricsReceived: number;
}

export interface IngestSettings {
  monthlyTraceQuota: number;
}

/** Root: the earliest-starting span without a parent, else the earliest-starting span (ties by span id). */
const rootOrder = (a: NormalizedSpan, b: NormalizedSpan): number =>
  Number(a.parentSpanId !== null) - Number(b.parentSpanId !== null) || a.startMs - b.startMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0);

/** Span attributes naming the session of a trace, in order of preference (OpenTelemetry, then OpenLLMetry's association properties). */
export const SESSION_KEYS = ['session.id', 'traceloop.association.properties.session_id'] as const;
/** Span attributes naming the end user of a trace. */
export const USER_KEYS = ['user.id', 'enduser.id', 'traceloop.association.properties.user_id'] as const;
/** A trace keeps at most this many `key=value` pairs for the attribute filter. */
export const MAX_ATTRIBUTE_PAIRS = 256;
/** Longest `key=value` pair kept for the attribute filter (longer values are message text, not labels). */
export const MAX_ATTRIBUTE_PAIR_LENGTH = 256;
/** Keys holding model input and output text: never filter keys (large, and they are content, not labels). */
const CONTENT_KEY = /^(gen_ai\.(prompt|completion|input\.messages|output\.messages|system_instructions)|llm\.(prompts|completions)|traceloop\.entity\.(input|output))(\.|$)/;

const scalarText = (v: unknown): string | null =>
  typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : null;

/** The first non-empty value of one of `keys`: the root span's first, then the spans' in start order. */
function firstValue(spans: NormalizedSpan[], keys: readonly string[]): string | null {
  for (const span of spans) {
    for (const key of keys) {
      const value = scalarText(span.attributes[key]);
      if (value !== null && value.length > 0 && value.length <= 256) return value;
    }
  }
  return null;
}

/** The `key=value` pairs of the trace's short scalar attributes (root first, then start order), sorted and unique. */
export function attributePairs(spans: NormalizedSpan[]): string[] {
  const pairs = new Set<string>();
  for (const span of spans) {
    for (const [key, raw] of Object.entries(span.attributes)) {
      if (CONTENT_KEY.test(key)) continue;
      const value = scalarText(raw);
      if (value === null) continue;
      const pair = `${key}=${value}`;
      if (pair.length > MAX_ATTRIBUTE_PAIR_LENGTH) continue;
      pairs.add(pair);
      if (pairs.size >= MAX_ATTRIBUTE_PAIRS) return [...pairs].sort();
    }
  }
  return [...pairs].sort();
}

export function summarize(trace: NormalizedTrace): TraceSummary {
  let startMs = Infinity;
  let endMs = -Infinity;
  let root: NormalizedSpan | undefined;
  let firstModel: NormalizedSpan | undefined;
  const models = new Set<string>();
  let tokensInput = 0;
  let tokensOutput = 0;
  let cost = 0;
  let hasError = false;
  for (const span of trace.spans) {
    if (span.startMs < startMs) startMs = span.startMs;
    if (span.endMs > endMs) endMs = span.endMs;
    if (!root || rootOrder(span, root) < 0) root = span;
    if (span.model !== null) {
      models.add(span.model);
      if (!firstModel || span.startMs < firstModel.startMs || (span.startMs === firstModel.startMs && span.spanId < firstModel.spanId)) {
        firstModel = span;
      }
    }
    tokensInput += span.tokensInput ?? 0;
    tokensOutput += span.tokensOutput ?? 0;
    cost += span.cost ?? 0;
    if (span.statusCode === 'ERROR') hasError = true;
  }
  const ordered = [...trace.spans].sort((a, b) => (a === root ? -1 : b === root ? 1 : a.startMs - b.startMs || (a.spanId < b.spanId ? -1 : a.spanId > b.spanId ? 1 : 0)));
  return {
    traceId: trace.traceId,
    sessionId: firstValue(ordered, SESSION_KEYS),
    userId: firstValue(ordered, USER_KEYS),
    attributePairs: attributePairs(ordered),
    startMs,
    endMs,
    spanCount: trace.spans.length,
    rootName: root!.name,
    rootAttributes: root!.attributes,
    model: firstModel?.model ?? null,
    models: [...models].sort(),
    tokensInput,
    tokensOutput,
    cost,
    hasError,
  };
}

const cellId = (k: CellKey): string => `${k.resolution}|${k.bucketMs}|${k.model}|${k.vendor}`;

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);

/** A stored span back in normalized form; its model-call fields live in its (mapped) attributes. */
const fromStoredSpan = (traceId: string, s: StoredSpan): NormalizedSpan => ({
  traceId,
  ...s,
  model: str(s.attributes['llm.model']),
  vendor: str(s.attributes['llm.vendor']),
  tokensInput: num(s.attributes['llm.tokens.input']),
  tokensOutput: num(s.attributes['llm.tokens.output']),
  cost: num(s.attributes['llm.cost']),
});

const toModelCall = (s: NormalizedSpan): ModelCallRow => ({
  traceId: s.traceId,
  spanId: s.spanId,
  startMs: s.startMs,
  model: s.model!,
  vendor: s.vendor,
  durationMs: s.endMs - s.startMs,
  tokensInput: s.tokensInput,
  tokensOutput: s.tokensOutput,
  cost: s.cost,
  isError: s.statusCode === 'ERROR',
});

export class IngestService {
  constructor(
    private readonly unitOfWork: IngestUnitOfWork,
    private readonly projects: ProjectRepository,
    /** The price table of a project's new spans (deployment prices with the project's overrides). */
    private readonly pricesFor: (projectId: string) => Promise<PriceTable>,
    private readonly clock: Clock,
    private readonly settings: IngestSettings,
  ) {}

  async ingest(auth: TelemetryAuth, body: IngestRequest): Promise<IngestCounts> {
    const project = await this.project(auth);
    return this.ingestBatch(auth, project, normalizeIngest(body, await this.pricesFor(project.id)));
  }

  /** Spans that break a rule are rejected alone and reported (OTLP partial success); the rest are stored. */
  async ingestOtlp(auth: TelemetryAuth, body: OtlpRequest): Promise<IngestCounts & { rejected: OtlpRejections }> {
    const project = await this.project(auth);
    const batch = normalizeOtlp(body, await this.pricesFor(project.id));
    return { ...(await this.ingestBatch(auth, project, batch)), rejected: batch.rejected };
  }

  private async project(auth: TelemetryAuth): Promise<Project> {
    const project = await this.projects.findProject(auth.orgId, auth.projectId);
    if (!project) throw notFound('Project');
    return project;
  }

  private async ingestBatch(auth: TelemetryAuth, project: Project, batch: NormalizedBatch): Promise<IngestCounts> {
    const counts: IngestCounts = {
      tracesReceived: batch.traces.length,
      spansReceived: batch.spanCount,
      metricsReceived: batch.metrics.length,
    };
    const threshold = samplingThreshold(project.sampleRate);
    const kept = batch.traces.filter((t) => keepTrace(t.traceId, threshold));
    if (kept.length === 0 && batch.metrics.length === 0) return counts;
    // One order for every lock this batch takes (trace rows, span keys): no deadlock between batches.
    kept.sort((a, b) => (a.traceId < b.traceId ? -1 : 1));
    const now = this.clock.now();

    // Batches usually carry new traces only, and are inserted without looking them up first; a
    // batch that meets a stored trace (or races another batch starting the same trace) is retried
    // with the lookup, and the project's next batches look up first for a while (OTLP exporters
    // often send one trace over several batches).
    let optimistic = (this.lookupFirst.get(project.id) ?? 0) <= 0;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.storeBatch(auth, project.id, kept, batch, now, optimistic);
        if (!optimistic) this.lookupFirst.set(project.id, (this.lookupFirst.get(project.id) ?? 1) - 1);
        return counts;
      } catch (err) {
        if (!(err instanceof ConcurrentInsertError) || attempt >= 5) throw err;
        if (optimistic) {
          if (this.lookupFirst.size > 10_000) this.lookupFirst.clear();
          this.lookupFirst.set(project.id, LOOKUP_FIRST_BATCHES);
        }
        optimistic = false;
      }
    }
  }

  /** Per project: how many more batches to store with a lookup first (a performance hint only). */
  private readonly lookupFirst = new Map<string, number>();

  private async storeBatch(auth: TelemetryAuth, projectId: string, kept: NormalizedTrace[], batch: NormalizedBatch, now: Date, optimistic: boolean): Promise<void> {
    await this.unitOfWork.transaction(async (tx) => {
      const newTraces = await this.storeTraces(tx, projectId, kept, now, optimistic);
      await tx.rollups.insertMetricPoints(projectId, batch.metrics);
      if (newTraces > 0) {
        // Last: the counter row is hot (every batch of the organization), so it is held briefly.
        const monthStart = startOfUtcMonth(now);
        const total = await tx.traces.addUsage(auth.orgId, monthStart, newTraces);
        const quota = this.settings.monthlyTraceQuota;
        if (total > quota) {
          throw new AppError('RATE_LIMITED', `Monthly trace quota of ${quota} traces exceeded`, {
            telemetryCode: 'quota_exceeded',
            details: { quota, used: total - newTraces, resets_at: startOfNextUtcMonth(now).toISOString() },
          });
        }
      }
    });
  }

  /** Writes traces (with their spans), model calls and rollups; returns how many traces were new. */
  private async storeTraces(tx: IngestTx, projectId: string, traces: NormalizedTrace[], now: Date, optimistic: boolean): Promise<number> {
    if (traces.length === 0) return 0;
    const byId = new Map(traces.map((t) => [t.traceId, t]));
    // A normalized span is a stored span with extra fields, which the span document leaves out.
    const write = (t: NormalizedTrace): TraceWrite => ({ ...summarize(t), spans: t.spans });
    const writes = traces.map(write);
    // Span meters (migration 0381): the project's meter lock first, shared (a build chunk holds it exclusively).
    const metered = await tx.spanMeters.lockShared(projectId);
    const { inserted, existing } = await tx.traces.claimTraces(projectId, writes, now, { optimistic });
    // The session and user rollups: what the new traces add, and what the extended ones change.
    const changes: TraceChange[] = writes.filter((w) => inserted.has(w.traceId)).map((w) => ({ before: null, after: w }));

    // Traces already stored: merge the batch's spans into the stored document (a re-sent span id
    // replaces the stored span) and rewrite the trace with its recomputed summary.
    const previous = new Map<string, { startMs: number; isModelCall: boolean }>();
    const merged: TraceWrite[] = [];
    // What the stored traces contribute to span meters before they change.
    const before = metered && existing.size > 0 ? await tx.spanMeters.cellsOf(projectId, [...existing.keys()]) : new Map<string, Cell[]>();
    for (const [traceId, stored] of existing) {
      const incoming = byId.get(traceId)!;
      const spans = new Map(stored.spans.map((s) => [s.spanId, fromStoredSpan(traceId, s)]));
      for (const span of incoming.spans) {
        const old = spans.get(span.spanId);
        if (old) previous.set(`${traceId}:${span.spanId}`, { startMs: old.startMs, isModelCall: old.model !== null });
        spans.set(span.spanId, span);
      }
      const rewritten = write({ traceId, spans: [...spans.values()] });
      merged.push(rewritten);
      changes.push({ before: stored.summary, after: rewritten });
    }
    await tx.traces.updateTraces(projectId, merged, now);
    if (metered) {
      // New traces (and stored ones that contributed nothing) add to the span meters' hours; a
      // stored trace that contributed has its cells, old and new, recomputed from the spans.
      const changed = [...existing.keys()].filter((id) => before.has(id));
      const added = [...inserted, ...[...existing.keys()].filter((id) => !before.has(id))];
      await tx.spanMeters.apply(projectId, added, changed, changed.flatMap((id) => before.get(id)!));
    }

    const spans: NormalizedSpan[] = [];
    for (const t of traces) for (const s of t.spans) spans.push(s);
    const replacedCalls: Array<{ traceId: string; spanId: string; startMs: number }> = [];
    for (const [key, old] of previous) {
      if (!old.isModelCall) continue;
      const [traceId, spanId] = key.split(':') as [string, string];
      replacedCalls.push({ traceId, spanId, startMs: old.startMs });
    }
    await tx.rollups.deleteModelCalls(projectId, replacedCalls);
    await tx.rollups.insertModelCalls(projectId, spans.filter((s) => s.model !== null).map(toModelCall));

    const deltas = new Map<string, { key: CellKey; stats: CellStats }>();
    const recomputeMinutes = new Set<number>();
    const addDelta = (key: CellKey, span: NormalizedSpan) => {
      const id = cellId(key);
      let entry = deltas.get(id);
      if (!entry) deltas.set(id, (entry = { key, stats: new CellStats() }));
      entry.stats.addSample(toModelCall(span));
    };
    for (const span of spans) {
      const old = previous.get(`${span.traceId}:${span.spanId}`);
      if (old) {
        if (old.isModelCall) recomputeMinutes.add(floorTo(old.startMs, 'm'));
        if (span.model !== null) recomputeMinutes.add(floorTo(span.startMs, 'm'));
        continue;
      }
      if (span.model === null) continue;
      addDelta({ resolution: '10s', bucketMs: floorTo(span.startMs, '10s'), model: span.model, vendor: vendorKey(span.vendor) }, span);
    }
    // Coarser cells get the merge of the next finer deltas (cheaper than adding every sample again).
    const mergeInto = (resolution: Resolution, finer: Array<{ key: CellKey; stats: CellStats }>) => {
      for (const { key, stats } of finer) {
        const coarse: CellKey = { ...key, resolution, bucketMs: floorTo(key.bucketMs, resolution) };
        const id = cellId(coarse);
        let entry = deltas.get(id);
        if (!entry) deltas.set(id, (entry = { key: coarse, stats: new CellStats() }));
        entry.stats.merge(stats);
      }
    };
    mergeInto('m', [...deltas.values()]);
    const minuteDeltas = [...deltas.values()].filter((d) => d.key.resolution === 'm');
    for (const resolution of ['5m', 'h', 'd'] as const) mergeInto(resolution, minuteDeltas);
    if (deltas.size > 0 || recomputeMinutes.size > 0) await this.applyRollups(tx, projectId, [...deltas.values()], recomputeMinutes);
    // The session and user rollups: one queue row, applied by the telemetry-group-changes job.
    await tx.traces.updateGroups(projectId, changes, now);
    return inserted.size;
  }

  private async applyRollups(
    tx: IngestTx,
    projectId: string,
    deltas: Array<{ key: CellKey; stats: CellStats }>,
    recomputeMinutes: Set<number>,
  ): Promise<void> {
    const recomputeFives = new Set([...recomputeMinutes].map((m) => floorTo(m, '5m')));
    const recomputeHours = new Set([...recomputeMinutes].map((m) => floorTo(m, 'h')));
    const recomputeDays = new Set([...recomputeHours].map((h) => floorTo(h, 'd')));
    const lockKeys = new Map<string, [number, number]>();
    const lock = (resolution: Resolution, bucketMs: number) => lockKeys.set(`${resolution}|${bucketMs}`, cellLockKey(projectId, resolution, bucketMs));
    for (const d of deltas) lock(d.key.resolution, d.key.bucketMs);
    const tenSeconds = [...recomputeMinutes].sort((a, b) => a - b).flatMap((m) => Array.from({ length: 6 }, (_, i) => m + i * RESOLUTION_MS['10s']));
    for (const t of tenSeconds) lock('10s', t);
    for (const m of recomputeMinutes) lock('m', m);
    for (const f of recomputeFives) lock('5m', f);
    for (const h of recomputeHours) lock('h', h);
    for (const d of recomputeDays) lock('d', d);
    await tx.rollups.lockCells([...lockKeys.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]));

    // Under the locks every committed change to these cells is visible: read, merge, write.
    const stored = new Map((await tx.rollups.readCells(projectId, deltas.map((d) => d.key))).map((row) => [cellId(row), row]));
    const writes: CellRow[] = deltas.map(({ key, stats }) => {
      const row = stored.get(cellId(key));
      const merged = row ? CellStats.decode(row.requests, row.errors, row.stats) : stats;
      if (row) merged.merge(stats);
      return { ...key, requests: merged.requests, errors: merged.errors, stats: merged.encodeDistributions() };
    });
    await tx.rollups.writeCells(projectId, writes);

    if (recomputeMinutes.size === 0) return;
    // The ten-second and minute cells of the touched minutes, rebuilt from the raw spans.
    const samples = await tx.rollups.rawSamples(
      [projectId],
      tenSeconds.map((t) => ({ fromMs: t, toMs: t + RESOLUTION_MS['10s'] })),
    );
    const rebuilt = new Map<string, { key: CellKey; stats: CellStats }>();
    for (const s of samples) {
      const tenSecond = tenSeconds[s.range]!;
      for (const key of [
        { resolution: '10s', bucketMs: tenSecond, model: s.model, vendor: vendorKey(s.vendor) },
        { resolution: 'm', bucketMs: floorTo(tenSecond, 'm'), model: s.model, vendor: vendorKey(s.vendor) },
      ] satisfies CellKey[]) {
        const id = cellId(key);
        let entry = rebuilt.get(id);
        if (!entry) rebuilt.set(id, (entry = { key, stats: new CellStats() }));
        entry.stats.addSample(s);
      }
    }
    await tx.rollups.deleteCells(projectId, '10s', tenSeconds);
    await tx.rollups.deleteCells(projectId, 'm', [...recomputeMinutes]);
    await tx.rollups.writeCells(
      projectId,
      [...rebuilt.values()].map(({ key, stats }) => ({ ...key, requests: stats.requests, errors: stats.errors, stats: stats.encodeDistributions() })),
    );
    await this.remerge(tx, projectId, '5m', 'm', [...recomputeFives]);
    await this.remerge(tx, projectId, 'h', 'm', [...recomputeHours]);
    await this.remerge(tx, projectId, 'd', 'h', [...recomputeDays]);
  }

  /** Rebuilds coarse cells as the merge of the finer cells they contain. */
  private async remerge(tx: IngestTx, projectId: string, coarse: Resolution, fine: Resolution, buckets: number[]): Promise<void> {
    const writes: CellRow[] = [];
    for (const bucketMs of buckets) {
      const rows = await tx.rollups.readCellsInRange(projectId, fine, { fromMs: bucketMs, toMs: bucketMs + RESOLUTION_MS[coarse] });
      const merged = new Map<string, { key: CellKey; stats: CellStats }>();
      for (const row of rows) {
        const key: CellKey = { resolution: coarse, bucketMs, model: row.model, vendor: row.vendor };
        const id = cellId(key);
        let entry = merged.get(id);
        if (!entry) merged.set(id, (entry = { key, stats: new CellStats() }));
        entry.stats.merge(CellStats.decode(row.requests, row.errors, row.stats));
      }
      for (const { key, stats } of merged.values()) {
        writes.push({ ...key, requests: stats.requests, errors: stats.errors, stats: stats.encodeDistributions() });
      }
    }
    await tx.rollups.deleteCells(projectId, coarse, buckets);
    await tx.rollups.writeCells(projectId, writes);
  }
}
