/**
 * `npm run bench`: every benchmark in turn (never two at once: they would measure each other),
 * each with `--json`, then the table in docs/benchmarks.md rewritten from their summaries (between
 * the `bench:generated` markers, with the date and the machine) and the summaries themselves saved
 * to docs/benchmarks.json. No figure in that table is typed by hand.
 *
 *   npm run bench                       # every benchmark, full length
 *   npm run bench -- --short            # CI-sized runs (BENCH_SHORT=1)
 *   npm run bench -- --only checkout,agent
 *   npm run bench -- --runs 3          # the whole sequence three times: each target's spread
 *   npm run bench -- --no-docs          # print the summaries, leave the docs alone
 *   npm run bench -- --render           # run nothing: rewrite the docs from docs/benchmarks.json
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { argv, machine, shortRun, type Summary, type Target } from './summary.js';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DOC = path.join(REPO_ROOT, 'docs', 'benchmarks.md');
const JSON_OUT = path.join(REPO_ROOT, 'docs', 'benchmarks.json');
const BEGIN = '<!-- bench:generated:begin (npm run bench writes this section; do not edit by hand) -->';
const END = '<!-- bench:generated:end -->';

const BENCHES = ['checkout', 'agent', 'ingest', 'usage', 'metrics', 'webhooks', 'growth', 'console', 'explorer'] as const;
const onlyIndex = argv.indexOf('--only');
const only = onlyIndex >= 0 ? argv[onlyIndex + 1]?.split(',') : undefined;
const writeDocs = !argv.includes('--no-docs');
const runsIndex = argv.indexOf('--runs');
const runs = runsIndex >= 0 ? Number(argv[runsIndex + 1]) : 1;
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs takes a whole number ≥ 1, not ${argv[runsIndex + 1]}`);

/** One run's targets of a benchmark, kept beside the last run's full summary when `--runs` > 1. */
interface RunTargets {
  date: string;
  loadAverage: number[];
  targets: Array<Pick<Target, 'name' | 'value' | 'met'>>;
}
type Result = (Summary & { runs?: RunTargets[] }) | { bench: string; error: string };

function runBench(name: string): Promise<Result> {
  return new Promise((resolve) => {
    const args = ['--import', 'tsx', `scripts/bench/${name}.ts`, '--json', ...(shortRun ? ['--short'] : [])];
    process.stderr.write(`\n== bench:${name}${shortRun ? ' (short)' : ''}\n`);
    const child = spawn(process.execPath, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...(shortRun ? { BENCH_SHORT: '1' } : {}) } });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.once('exit', (code) => {
      // A benchmark exits 1 when a target is missed: its summary says so. No summary is a failure.
      const line = out.trim().split('\n').filter((l) => l.startsWith('{')).pop();
      if (line) resolve(JSON.parse(line) as Summary);
      else resolve({ bench: name, error: `exited with ${code} without a summary` });
    });
  });
}

const fmt = (x: unknown): string => (typeof x === 'number' ? x.toLocaleString('en-US', { maximumFractionDigits: 3 }) : x === null || x === undefined ? 'n/a' : String(x));

function targetRows(targets: Target[]): string[] {
  return [
    '| target | value | goal | met | per round |',
    '|---|---|---|---|---|',
    ...targets.map((t) => `| ${t.name} | ${fmt(t.value)} ${t.unit} | ${t.atMost ? '≤' : '≥'} ${fmt(t.target)} | ${t.met ? 'yes' : '**no**'} | ${t.rounds ? t.rounds.map(fmt).join(', ') : ''}${t.note ? ` ${t.note}` : ''} |`),
  ];
}

/**
 * bench:growth: one row per request with its cost on both organizations (server + PostgreSQL CPU
 * per request; before/after when measured with BENCH_GROWTH_BEFORE), then each list's plan.
 */
function growthRows(figures: Record<string, unknown>): string[] {
  const requests = figures.requests as Record<string, Record<string, number>>;
  const withBefore = Object.values(requests).some((r) => r.beforeLargeMs !== undefined);
  const lines = [
    `| request |${withBefore ? ' before: small ms | before: large ms | before: large wall ms |' : ''} small: server + PostgreSQL ms | large: server + PostgreSQL ms | large wall ms | growth large/small |`,
    `|---|${withBefore ? '---|---|---|' : ''}---|---|---|---|`,
    ...Object.entries(requests).map(([name, r]) =>
      `| \`${name}\` |${withBefore ? ` ${fmt(r.beforeSmallMs)} | ${fmt(r.beforeLargeMs)} | ${fmt(r.beforeLargeWallMs)} |` : ''} ${fmt(r.smallServerMs)} + ${fmt(r.smallPostgresMs)} | ${fmt(r.largeServerMs)} + ${fmt(r.largePostgresMs)} | ${fmt(r.largeWallMs)} | ×${fmt(r.ratio)} |`),
    '',
  ];
  const rest = Object.fromEntries(Object.entries(figures).filter(([k]) => k !== 'requests' && k !== 'plans'));
  lines.push(...figureRows(rest), '');
  const plans = (figures.plans ?? {}) as Record<string, string>;
  lines.push('Plans on the large organization (`EXPLAIN (ANALYZE, BUFFERS)` of the queries the repositories run for each first page):', '');
  for (const [name, plan] of Object.entries(plans)) lines.push(`<details><summary>${name}</summary>`, '', '```text', plan, '```', '', '</details>', '');
  return lines;
}

function figureRows(figures: Record<string, unknown>): string[] {
  const isRoute = (v: unknown) => typeof v === 'object' && v !== null && 'serverCpuMsPerRequest' in v && 'route' in v;
  const routes = Object.values(figures).filter(isRoute) as Array<Record<string, unknown>>;
  const rest = Object.entries(figures).filter(([, v]) => !isRoute(v));
  const lines: string[] = [];
  // Route tables (bench:checkout): one row per route and connection count.
  if (routes.length > 0) {
    lines.push(
      '| route | connections | req/s | p50 ms | p99 ms | server CPU ms/req | PostgreSQL CPU ms/req | load generator CPU ms/req |',
      '|---|---|---|---|---|---|---|---|',
      ...routes.map((r) => `| ${fmt(r.route)} | ${fmt(r.connections)} | ${fmt(r.requestsPerSecond)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(r.serverCpuMsPerRequest)} | ${fmt(r.postgresCpuMsPerRequest)} | ${fmt(r.loadGeneratorCpuMsPerRequest)} |`),
    );
  }
  if (rest.length === 0) return lines;
  const flat: Array<[string, unknown]> = [];
  const walk = (prefix: string, value: unknown) => {
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) for (const [k, v] of Object.entries(value)) walk(prefix ? `${prefix} · ${k}` : k, v);
    else flat.push([prefix, Array.isArray(value) ? value.map(fmt).join(', ') : value]);
  };
  for (const [k, v] of rest) walk(k, v);
  if (lines.length > 0) lines.push('');
  lines.push('| figure | value |', '|---|---|', ...flat.map(([k, v]) => `| ${k} | ${fmt(v)} |`));
  return lines;
}

/** Each target's value in every run (in run order), its range and in how many runs it was met. */
function spreadRows(runsOfBench: RunTargets[]): string[] {
  const names = runsOfBench[0]!.targets.map((t) => t.name);
  return [
    `Spread over ${runsOfBench.length} runs of the whole sequence (load average at each run's end: ${runsOfBench.map((r) => r.loadAverage[0]).map(fmt).join(', ')}):`,
    '',
    `| target | ${runsOfBench.map((_, i) => `run ${i + 1}`).join(' | ')} | range | met in |`,
    `|---|${runsOfBench.map(() => '---|').join('')}---|---|`,
    ...names.map((name) => {
      const values = runsOfBench.map((r) => r.targets.find((t) => t.name === name));
      const numbers = values.filter((v) => v !== undefined).map((v) => v.value);
      const met = values.filter((v) => v?.met).length;
      return `| ${name} | ${values.map((v) => (v ? fmt(v.value) : 'n/a')).join(' | ')} | ${fmt(Math.min(...numbers))}–${fmt(Math.max(...numbers))} | ${met} of ${runsOfBench.length} |`;
    }),
  ];
}

function section(results: Result[]): string {
  const m = machine();
  const lines = [BEGIN, '', `Written ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}\` (each benchmark's own date below), on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.platform}, Node ${m.node}.`, ''];
  for (const r of results) {
    lines.push(`### bench:${r.bench}`, '');
    if ('error' in r) {
      lines.push(`Did not finish: ${r.error}.`, '');
      continue;
    }
    lines.push(`${r.date.slice(0, 16).replace('T', ' ')} UTC, load average ${r.machine.loadAverage.join(' / ')} at the end; settings ${JSON.stringify(r.settings)}.`, '');
    lines.push(...targetRows(r.targets), '');
    if (r.runs && r.runs.length > 1) lines.push(...spreadRows(r.runs), '', 'The tables below are the last run\'s.', '');
    if (Object.keys(r.floors).length > 0) lines.push(`Floors: \`${JSON.stringify(r.floors)}\``, '');
    lines.push(...(r.bench === 'growth' ? growthRows(r.figures) : figureRows(r.figures)), '');
  }
  lines.push(END);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const renderOnly = argv.includes('--render');
  const selected = BENCHES.filter((b) => !renderOnly && (!only || only.includes(b)));
  // The whole sequence again per run (not one benchmark N times in a row), so a drift of the
  // machine's speed spreads over every benchmark alike.
  const byRun: Result[][] = [];
  for (let run = 0; run < runs; run++) {
    if (runs > 1) process.stderr.write(`\n=== run ${run + 1} of ${runs}\n`);
    const results: Result[] = [];
    for (const name of selected) results.push(await runBench(name));
    byRun.push(results);
  }
  const results: Result[] = byRun.at(-1) ?? [];
  if (runs > 1) {
    for (const last of results) {
      if ('error' in last) continue;
      last.runs = byRun.flatMap((run) => run.filter((r): r is Summary => r.bench === last.bench && !('error' in r)))
        .map((r) => ({ date: r.date, loadAverage: r.machine.loadAverage, targets: r.targets.map((t) => ({ name: t.name, value: t.value, met: t.met })) }));
    }
  }
  process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  if (!writeDocs) return;
  // Benchmarks not run this time keep their last saved summary.
  let saved: Result[] = [];
  try {
    saved = JSON.parse(readFileSync(JSON_OUT, 'utf8'));
  } catch {
    saved = [];
  }
  const merged = BENCHES.map((b) => results.find((r) => r.bench === b) ?? saved.find((r) => r.bench === b)).filter((r) => r !== undefined);
  writeFileSync(JSON_OUT, `${JSON.stringify(merged, null, 2)}\n`);
  const doc = readFileSync(DOC, 'utf8');
  const begin = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`docs/benchmarks.md has no ${BEGIN} … ${END} section`);
  writeFileSync(DOC, `${doc.slice(0, begin)}${section(merged)}${doc.slice(end + END.length)}`);
  process.stderr.write(`wrote ${path.relative(REPO_ROOT, DOC)} and ${path.relative(REPO_ROOT, JSON_OUT)}\n`);
  process.exitCode = byRun.flat().some((r) => 'error' in r) ? 1 : 0;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
