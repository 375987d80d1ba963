/**
 * The machine-readable summary every `bench:*` prints with `--json` (one JSON document on stdout,
 * the human table then goes to stderr), and the flags they share: `--json`, and `--short` (or
 * BENCH_SHORT=1) for a CI-sized run. `npm run bench` (scripts/bench/all.ts) collects the summaries
 * and writes the table in docs/benchmarks.md from them.
 */
import os from 'node:os';

export const argv = process.argv.slice(2);
export const jsonOutput = argv.includes('--json');
export const shortRun = argv.includes('--short') || process.env.BENCH_SHORT === '1';

/**
 * With BENCH_QUIET_LOAD=x, waits until the one-minute load average is at most x (polled every
 * 15 s, for at most BENCH_QUIET_WAIT_MINUTES, default 180) before a bench measures: the data can be
 * loaded while the machine is busy and measured once it is quiet. Returns the load it started at.
 */
export async function waitForQuiet(label: string): Promise<number[]> {
  const limit = Number(process.env.BENCH_QUIET_LOAD ?? NaN);
  if (Number.isFinite(limit)) {
    const until = Date.now() + Number(process.env.BENCH_QUIET_WAIT_MINUTES ?? 180) * 60_000;
    let said = false;
    while (os.loadavg()[0]! > limit && Date.now() < until) {
      if (!said) report(`${label}: waiting for the load average to fall to ${limit} (now ${os.loadavg()[0]!.toFixed(2)}) …`);
      said = true;
      await new Promise((r) => setTimeout(r, 15_000));
    }
  }
  const load = os.loadavg().map((x) => Math.round(x * 100) / 100);
  report(`${label}: measuring at load average ${load.join(' / ')} (${new Date().toISOString()})`);
  return load;
}

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  platform: string;
  node: string;
  /** 1, 5 and 15 minute load averages when the summary was made. */
  loadAverage: number[];
}

export function machine(): Machine {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    platform: `${os.platform()} ${os.release()}`,
    node: process.version,
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

/** One figure held against its target. `ratio` figures are "floor CPU / route CPU" and the like: higher is better unless `atMost`. */
export interface Target {
  name: string;
  value: number;
  unit: string;
  target: number;
  /** true: the value must not exceed the target; false: it must reach it. */
  atMost: boolean;
  met: boolean;
  /** Per-round values behind `value` (its median), when it has rounds. */
  rounds?: number[];
  note?: string;
}

export function target(name: string, value: number, unit: string, goal: number, atMost: boolean, extra: Pick<Target, 'rounds' | 'note'> = {}): Target {
  return { name, value: round(value), unit, target: goal, atMost, met: atMost ? value <= goal : value >= goal, ...extra, ...(extra.rounds ? { rounds: extra.rounds.map(round) } : {}) };
}

export interface Summary {
  bench: string;
  date: string;
  machine: Machine;
  short: boolean;
  /** What the run was given (durations, rounds, connections, sizes). */
  settings: Record<string, unknown>;
  /** The measured figures, by name (per route, per connection count …). */
  figures: Record<string, unknown>;
  /** The floors the ratios are taken against, measured in the same run. */
  floors: Record<string, unknown>;
  targets: Target[];
  allTargetsMet: boolean;
}

export function summary(bench: string, parts: Pick<Summary, 'settings' | 'figures' | 'floors' | 'targets'>): Summary {
  return { bench, date: new Date().toISOString(), machine: machine(), short: shortRun, ...parts, allTargetsMet: parts.targets.every((t) => t.met) };
}

/** Rounds to 4 significant digits (keeps the JSON readable). */
export function round(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  return Number(x.toPrecision(4));
}

export const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** The human report: stdout normally, stderr under --json (stdout then carries only the JSON). */
export function report(text: string): void {
  (jsonOutput ? process.stderr : process.stdout).write(text.endsWith('\n') ? text : `${text}\n`);
}

/** Prints the summary under --json; the human lines of each target otherwise go with the report. */
export function emit(result: Summary): void {
  if (jsonOutput) process.stdout.write(`${JSON.stringify(result)}\n`);
  const lines = result.targets.map(
    (t) => `target ${t.name}: ${t.value} ${t.unit} (${t.atMost ? '≤' : '≥'} ${t.target}: ${t.met ? 'met' : 'MISSED'})${t.rounds ? `; rounds ${t.rounds.join(', ')}` : ''}${t.note ? `; ${t.note}` : ''}`,
  );
  report(lines.join('\n'));
}
