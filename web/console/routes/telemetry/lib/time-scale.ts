/**
 * The waterfall's one time scale: every bar of a trace is placed on it (offset and width as
 * fractions of the trace's duration), and its ticks are round durations (1, 2 or 5 × 10ⁿ ms).
 */
export interface TimeScale {
  startMs: number;
  durationMs: number;
  /** Where a span's bar starts and how wide it is, as fractions in [0, 1]. */
  bar(startMs: number, endMs: number): { left: number; width: number };
  ticks: Array<{ at: number; label: string }>;
}

/** At least this fraction wide, so a 0 ms span still shows as a mark. */
export const MIN_BAR_WIDTH = 0.002;

export function formatDuration(ms: number): string {
  if (ms === 0) return '0 ms';
  if (ms < 1) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${Number(ms.toPrecision(3))} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toPrecision(3))} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return seconds === 0 ? `${minutes} min` : `${minutes} min ${seconds} s`;
}

/** The smallest round step (1, 2, 5 × 10ⁿ) that gives at most `maxTicks` intervals. */
export function niceStep(durationMs: number, maxTicks: number): number {
  if (durationMs <= 0) return 1;
  const raw = durationMs / Math.max(1, maxTicks);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

export function timeScale(startMs: number, endMs: number, maxTicks = 6): TimeScale {
  const durationMs = Math.max(0, endMs - startMs);
  const span = durationMs || 1;
  const clamp = (x: number) => Math.min(1, Math.max(0, x));
  const step = niceStep(durationMs, maxTicks);
  const ticks: TimeScale['ticks'] = [];
  for (let t = 0; t <= durationMs + 1e-9 && ticks.length <= maxTicks + 1; t += step) ticks.push({ at: clamp(t / span), label: formatDuration(t) });
  return {
    startMs,
    durationMs,
    bar(s, e) {
      const left = clamp((s - startMs) / span);
      const width = Math.max(MIN_BAR_WIDTH, clamp((Math.max(e, s) - startMs) / span) - left);
      return { left: Math.min(left, 1 - MIN_BAR_WIDTH), width: Math.min(width, 1) };
    },
    ticks,
  };
}
