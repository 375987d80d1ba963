/**
 * `npm run bench`: every benchmark in turn (never two at once: they would measure each other),
 * each with `--json`, then the table in docs/benchmarks.md rewritten from their summaries (between
 * the `bench:generated` markers, with the date and the machine) and the summaries themselves saved
 * to docs/benchmarks.json. No figure in that table is typed by hand.
 *
 *   npm run bench                       # every benchmark, full length
 *   npm run bench -- --short            # CI-sized runs (BENCH_SHORT=1)
 *   npm run bench -- --only checkout,agent
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

const BENCHES = ['checkout', 'agent', 'ingest', 'metrics', 'webhooks'] as const;
const onlyIndex = argv.indexOf('--only');
const only = onlyIndex >= 0 ? argv[onlyIndex + 1]?.split(',') : undefined;
const writeDocs = !argv.includes('--no-docs');

function runBench(name: string): Promise<Summary | { bench: string; error: string }> {
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

function section(results: Array<Summary | { bench: string; error: string }>): string {
  const m = machine();
  const lines = [BEGIN, '', `Written ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench${shortRun ? ' -- --short' : ''}\` (each benchmark's own date below), on ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.platform}, Node ${m.node}.`, ''];
  for (const r of results) {
    lines.push(`### bench:${r.bench}`, '');
    if ('error' in r) {
      lines.push(`Did not finish: ${r.error}.`, '');
      continue;
    }
    lines.push(`${r.date.slice(0, 16).replace('T', ' ')} UTC, load average ${r.machine.loadAverage.join(' / ')} at the end; settings ${JSON.stringify(r.settings)}.`, '');
    lines.push(...targetRows(r.targets), '');
    if (Object.keys(r.floors).length > 0) lines.push(`Floors: \`${JSON.stringify(r.floors)}\``, '');
    lines.push(...figureRows(r.figures), '');
  }
  lines.push(END);
  return lines.join('\n');
}

async function main(): Promise<void> {
  const results: Array<Summary | { bench: string; error: string }> = [];
  const renderOnly = argv.includes('--render');
  for (const name of BENCHES.filter((b) => !renderOnly && (!only || only.includes(b)))) results.push(await runBench(name));
  process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  if (!writeDocs) return;
  // Benchmarks not run this time keep their last saved summary.
  let saved: Array<Summary | { bench: string; error: string }> = [];
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
  process.exitCode = results.some((r) => 'error' in r) ? 1 : 0;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
