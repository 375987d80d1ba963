/**
 * The meter form's state and the definition it sends (pure, tested in test/console/meter-form.test.ts):
 * what the person types (text fields, one `key=value` per line for properties and attributes) to
 * the merchant API's MeterCreate / MeterUpdate body and the console's preview body, with the
 * mistakes the form can tell before asking the server.
 */
import type { components } from '../../../../../generated/merchant.js';

type Meter = components['schemas']['Meter'];
type MeterFilter = components['schemas']['MeterFilter'];
type Scalar = string | number | boolean;
export type Aggregation = Meter['aggregation'];
export type Source = Meter['source'];

export interface MeterFormState {
  name: string;
  source: Source;
  aggregation: Aggregation;
  property: string;
  customerAttribute: string;
  eventName: string;
  projectId: string;
  model: string;
  vendor: string;
  /** One `key=value` per line: properties (events) or attributes (spans). */
  pairs: string;
}

export const EMPTY_FORM: MeterFormState = { name: '', source: 'EVENTS', aggregation: 'sum', property: '', customerAttribute: '', eventName: '', projectId: '', model: '', vendor: '', pairs: '' };

export interface MeterDefinition {
  source: Source;
  filter: MeterFilter;
  aggregation: Aggregation;
  property?: string;
  customerAttribute?: string;
}

/** `true`/`false` are booleans, plain decimal numbers are numbers, `"…"` keeps its text as a string, anything else is a string. */
export function parseScalar(text: string): Scalar {
  const t = text.trim();
  if (t === 'true') return true;
  if (t === 'false') return false;
  if (/^-?\d+(\.\d+)?$/.test(t) && Number.isFinite(Number(t))) return Number(t);
  if (t.length >= 2 && t.startsWith('"') && t.endsWith('"')) return t.slice(1, -1);
  return t;
}

/** `key=value` lines to pairs; blank lines are skipped; a line without `=` or an empty key is an error naming the line. */
export function parsePairs(text: string): { pairs: Record<string, Scalar> } | { error: string } {
  const pairs: Record<string, Scalar> = {};
  const lines = text.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (!line) continue;
    const at = line.indexOf('=');
    const key = at < 0 ? '' : line.slice(0, at).trim();
    if (!key) return { error: `Line ${i + 1}: write key=value` };
    pairs[key] = parseScalar(line.slice(at + 1));
  }
  return { pairs };
}

/** Pairs back to lines; a string that would read back as another value (`42`, `true`, spaces) is quoted. */
export function formatPairs(pairs: Record<string, Scalar> | undefined): string {
  const text = (v: Scalar) => (typeof v !== 'string' ? String(v) : parseScalar(v) === v ? v : `"${v}"`);
  return Object.entries(pairs ?? {})
    .map(([k, v]) => `${k}=${text(v)}`)
    .join('\n');
}

/** The filter the state describes (only the source's own fields). */
export function filterOf(state: MeterFormState): { filter: MeterFilter } | { error: string } {
  const parsed = parsePairs(state.pairs);
  if ('error' in parsed) return parsed;
  const has = Object.keys(parsed.pairs).length > 0;
  if (state.source === 'EVENTS') {
    if (!state.eventName.trim()) return { error: 'Give the event name' };
    return { filter: { eventName: state.eventName.trim(), ...(has ? { properties: parsed.pairs } : {}) } };
  }
  if (!state.projectId.trim()) return { error: 'Give the telemetry project id (PRJ_…)' };
  return {
    filter: {
      projectId: state.projectId.trim(),
      ...(state.model.trim() ? { model: state.model.trim() } : {}),
      ...(state.vendor.trim() ? { vendor: state.vendor.trim() } : {}),
      ...(has ? { attributes: parsed.pairs } : {}),
    },
  };
}

/** The definition to preview or create, or the first thing missing (the server checks the rest). */
export function definitionOf(state: MeterFormState): { definition: MeterDefinition } | { error: string } {
  const filter = filterOf(state);
  if ('error' in filter) return filter;
  const readsProperty = state.aggregation !== 'count';
  if (readsProperty && !state.property.trim()) return { error: `Give the property ${state.aggregation === 'unique' ? 'whose distinct values are counted' : 'to aggregate'}` };
  if (state.source === 'SPANS' && !state.customerAttribute.trim()) return { error: 'Give the span attribute naming the customer (e.g. user.id)' };
  return {
    definition: {
      source: state.source,
      filter: filter.filter,
      aggregation: state.aggregation,
      ...(readsProperty ? { property: state.property.trim() } : {}),
      ...(state.source === 'SPANS' ? { customerAttribute: state.customerAttribute.trim() } : {}),
    },
  };
}

/** A saved meter back into the form (editing: name and filter change, the rest is shown fixed). */
export function formFromMeter(m: Meter): MeterFormState {
  const f = m.filter;
  return {
    name: m.name,
    source: m.source,
    aggregation: m.aggregation,
    property: m.property ?? '',
    customerAttribute: m.customerAttribute ?? '',
    eventName: f.eventName ?? '',
    projectId: f.projectId ?? '',
    model: f.model ?? '',
    vendor: f.vendor ?? '',
    pairs: formatPairs(m.source === 'EVENTS' ? f.properties : f.attributes),
  };
}

/** The day of a preview bucket (UTC, as the buckets are) for the chart's axis and table. */
export const bucketDay = (iso: string) => iso.slice(0, 10);

/** A measured quantity in words: whole numbers grouped, fractions (a sum of `llm.cost`) to 6 places. */
export function formatMeasured(n: number, locale = 'en-US'): string {
  return new Intl.NumberFormat(locale, { useGrouping: true, maximumFractionDigits: Number.isInteger(n) ? 0 : 6 }).format(n);
}
