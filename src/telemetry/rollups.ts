/**
 * Time arithmetic of the metric rollups: minute, five-minute, hour and UTC-day cells, their lock
 * keys, and the decomposition of a query bucket into the coarsest aligned cells that tile it
 * (plus raw spans for the sub-minute edges).
 */
/** Minute, five-minute, hour and UTC-day cells. */
export type Resolution = 'm' | '5m' | 'h' | 'd';

export interface TimeRange {
  fromMs: number;
  toMs: number;
}

export const RESOLUTION_MS: Record<Resolution, number> = { m: 60_000, '5m': 300_000, h: 3_600_000, d: 86_400_000 };

/** Epoch ms is UTC, and every resolution divides a UTC day, so plain flooring aligns to UTC. */
export const floorTo = (ms: number, resolution: Resolution): number => Math.floor(ms / RESOLUTION_MS[resolution]) * RESOLUTION_MS[resolution];
export const ceilTo = (ms: number, resolution: Resolution): number => Math.ceil(ms / RESOLUTION_MS[resolution]) * RESOLUTION_MS[resolution];

/** Rollup cells key a missing vendor as ''; metrics present it as `unknown`. */
export const vendorKey = (vendor: string | null): string => vendor ?? '';

/** 32-bit FNV-1a, as a signed int4 for pg_advisory_xact_lock(int4, int4). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h | 0;
}

/** The advisory-lock key of a cell (collisions only make two cells share a mutex). */
export const cellLockKey = (projectId: string, resolution: Resolution, bucketMs: number): [number, number] => [
  fnv1a(`telemetry:${projectId}`),
  fnv1a(`${resolution}:${bucketMs}`),
];

export interface Decomposition {
  raw: TimeRange[];
  m: TimeRange[];
  '5m': TimeRange[];
  h: TimeRange[];
  d: TimeRange[];
}

const ORDER: Resolution[] = ['d', 'h', '5m', 'm'];
const WITHOUT_FIVE_MINUTES: Resolution[] = ['d', 'h', 'm'];

/**
 * Tiles [from, to) with day cells where whole days fit, hours where whole hours fit, five-minute
 * cells, minutes, and raw spans for what is left (sub-minute edges). Each piece lies inside the
 * bucket. Five-minute cells are used only from `fiveMinutesFromMs` on (before it they may be
 * incomplete, see migration 0088); earlier parts of the range are tiled without them.
 */
export function decompose(fromMs: number, toMs: number, fiveMinutesFromMs = 0): Decomposition {
  const out: Decomposition = { raw: [], m: [], '5m': [], h: [], d: [] };
  const visit = (order: Resolution[], a: number, b: number, level: number): void => {
    if (a >= b) return;
    for (let l = level; l < order.length; l++) {
      const resolution = order[l]!;
      const lo = ceilTo(a, resolution);
      const hi = floorTo(b, resolution);
      if (lo < hi) {
        out[resolution].push({ fromMs: lo, toMs: hi });
        visit(order, a, lo, l + 1);
        visit(order, hi, b, l + 1);
        return;
      }
    }
    out.raw.push({ fromMs: a, toMs: b });
  };
  // The boundary is a day boundary (or the epoch), so splitting there loses no day cell.
  const split = Math.min(Math.max(fiveMinutesFromMs, fromMs), toMs);
  visit(WITHOUT_FIVE_MINUTES, fromMs, split, 0);
  visit(ORDER, split, toMs, 0);
  return out;
}
