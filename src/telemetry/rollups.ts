/**
 * Time arithmetic of the metric rollups: ten-second, minute, five-minute, hour and UTC-day cells,
 * their lock keys, and the decomposition of a query bucket into the coarsest aligned cells that
 * tile it (plus raw spans for the sub-ten-second edges).
 */
/** Ten-second, minute, five-minute, hour and UTC-day cells. */
export type Resolution = '10s' | 'm' | '5m' | 'h' | 'd';

export interface TimeRange {
  fromMs: number;
  toMs: number;
}

export const RESOLUTION_MS: Record<Resolution, number> = { '10s': 10_000, m: 60_000, '5m': 300_000, h: 3_600_000, d: 86_400_000 };

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
  '10s': TimeRange[];
  m: TimeRange[];
  '5m': TimeRange[];
  h: TimeRange[];
  d: TimeRange[];
}

/** Coarsest first. */
const ORDER: Resolution[] = ['d', 'h', '5m', 'm', '10s'];

/** From when (epoch ms) each resolution's cells are complete; a resolution not listed, from the start. */
export type CompleteFrom = Partial<Record<Resolution, number>>;

/**
 * Tiles [from, to) with day cells where whole days fit, hours where whole hours fit, five-minute
 * cells, minutes, ten-second cells, and raw spans for what is left. Each piece lies inside the
 * bucket. A resolution added by a later release (five-minute and ten-second cells, migrations
 * 0088 and 0089) is used only from when its cells are complete; earlier parts of the range are
 * tiled without it. Those points are day boundaries, so splitting there loses no cell.
 */
export function decompose(fromMs: number, toMs: number, completeFrom: CompleteFrom = {}): Decomposition {
  const out: Decomposition = { raw: [], '10s': [], m: [], '5m': [], h: [], d: [] };
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
  const cuts = [...new Set(Object.values(completeFrom))].filter((t) => t > fromMs && t < toMs).sort((a, b) => a - b);
  const bounds = [fromMs, ...cuts, toMs];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const a = bounds[i]!;
    visit(ORDER.filter((r) => (completeFrom[r] ?? 0) <= a), a, bounds[i + 1]!, 0);
  }
  return out;
}
