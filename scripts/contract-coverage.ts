/**
 * `npm run coverage:contract`: which operation × documented status pairs of openapi/*.yaml the
 * test suite exercised, read from the lines the listeners record while KASSA_CONTRACT_LOG is set
 * (src/http/contract-log.ts). Prints one table per document and fails when a documented pair was
 * answered by no test, or when an operation answered a status its document does not list.
 * Pairs that cannot be exercised yet are listed in ALLOWED_GAPS with the issue that closes them,
 * and printed as such, never skipped silently.
 *
 *   KASSA_CONTRACT_LOG=coverage/contract npm test && npm run -s coverage:contract
 *   npm run -s coverage:contract -- --dir coverage/contract
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listOperations, loadDocument, type DocumentName } from '../src/http/spec.js';

export const DEFAULT_LOG_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../coverage/contract');
const DOCUMENTS: DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin', 'console'];

export interface AllowedGap {
  /** An operationId, or `*` for every operation of `document` documenting `status`. */
  operationId: string;
  document: DocumentName;
  status: number;
  until: string;
  reason: string;
}

/**
 * Documented pairs no test can produce yet. Each entry names what will make it testable; an
 * entry whose pairs are all covered is reported as stale so the list only shrinks.
 */
export const ALLOWED_GAPS: AllowedGap[] = [];

export interface Pair {
  document: DocumentName;
  operationId: string;
  status: number;
}

export async function documentedPairs(): Promise<Pair[]> {
  const pairs: Pair[] = [];
  for (const document of DOCUMENTS) {
    for (const op of listOperations(await loadDocument(document))) {
      for (const status of Object.keys((op.operation.responses as Record<string, unknown>) ?? {})) {
        if (/^\d{3}$/.test(status)) pairs.push({ document, operationId: op.operationId, status: Number(status) });
      }
    }
  }
  return pairs;
}

/** `operationId status` lines of every recorder file in `dir` → how often each pair was answered. */
export async function observedPairs(dir: string): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => f.endsWith('.log'));
  for (const file of files) {
    for (const line of (await readFile(path.join(dir, file), 'utf8')).split('\n')) {
      if (!/^\S+ \d{3}$/.test(line)) continue;
      seen.set(line, (seen.get(line) ?? 0) + 1);
    }
  }
  return seen;
}

export function allowanceFor(pair: Pair, allowed: AllowedGap[] = ALLOWED_GAPS): AllowedGap | undefined {
  return allowed.find(
    (gap) => gap.document === pair.document && gap.status === pair.status && (gap.operationId === '*' || gap.operationId === pair.operationId),
  );
}

export interface CoverageReport {
  text: string;
  covered: Pair[];
  allowed: Array<Pair & { gap: AllowedGap }>;
  missing: Pair[];
  undocumented: string[];
  stale: AllowedGap[];
}

export function buildReport(documented: Pair[], observed: Map<string, number>, allowed: AllowedGap[] = ALLOWED_GAPS): CoverageReport {
  const covered: Pair[] = [];
  const allowedPairs: Array<Pair & { gap: AllowedGap }> = [];
  const missing: Pair[] = [];
  const key = (p: Pair) => `${p.operationId} ${p.status}`;
  for (const pair of documented) {
    if (observed.has(key(pair))) covered.push(pair);
    else {
      const gap = allowanceFor(pair, allowed);
      if (gap) allowedPairs.push({ ...pair, gap });
      else missing.push(pair);
    }
  }
  const documentedKeys = new Set(documented.map(key));
  const knownOperations = new Set(documented.map((p) => p.operationId));
  const undocumented = [...observed.keys()].filter((k) => knownOperations.has(k.split(' ')[0]!) && !documentedKeys.has(k)).sort();
  const stale = allowed.filter((gap) => !documented.some((p) => allowanceFor(p, [gap]) && !observed.has(key(p))));

  const lines: string[] = [];
  for (const document of DOCUMENTS) {
    const pairs = documented.filter((p) => p.document === document);
    const statuses = [...new Set(pairs.map((p) => p.status))].sort((a, b) => a - b);
    const ops = [...new Set(pairs.map((p) => p.operationId))];
    const width = Math.max(...ops.map((o) => o.length), 9);
    const count = (list: Pair[]) => list.filter((p) => p.document === document).length;
    lines.push(
      '',
      `${document}: ${ops.length} operations, ${pairs.length} documented pairs — ${count(covered)} covered, ${count(allowedPairs)} allowed gaps, ${count(missing)} missing`,
      `${'operation'.padEnd(width)}  ${statuses.map((s) => String(s).padStart(4)).join('')}`,
    );
    for (const op of ops) {
      const cells = statuses.map((status) => {
        const pair = pairs.find((p) => p.operationId === op && p.status === status);
        if (!pair) return '   ·';
        if (observed.has(key(pair))) return '   ✓';
        return allowanceFor(pair, allowed) ? '   ~' : '   ✗';
      });
      lines.push(`${op.padEnd(width)}  ${cells.join('')}`);
    }
  }
  lines.push('', '✓ exercised by a test   ~ allowed gap (listed below)   ✗ missing   · not documented');
  const byGap = new Map<AllowedGap, Pair[]>();
  for (const p of allowedPairs) byGap.set(p.gap, [...(byGap.get(p.gap) ?? []), p]);
  for (const [gap, list] of byGap) {
    lines.push(`uncovered (allowed until ${gap.until}): ${gap.document} ${gap.operationId} ${gap.status} — ${list.length} pair(s); ${gap.reason}`);
  }
  for (const gap of stale) lines.push(`stale allowance (every pair is covered now; remove it): ${gap.document} ${gap.operationId} ${gap.status}`);
  for (const p of missing) lines.push(`MISSING: ${p.document} ${p.operationId} ${p.status} is documented but no test received it`);
  for (const k of undocumented) lines.push(`UNDOCUMENTED: ${k} was answered but the document does not list it`);
  const total = documented.length;
  lines.push(
    '',
    `contract coverage: ${covered.length}/${total} documented pairs exercised (${((covered.length / total) * 100).toFixed(1)} %), ${allowedPairs.length} allowed gaps, ${missing.length} missing, ${undocumented.length} undocumented`,
  );
  return { text: lines.join('\n'), covered, allowed: allowedPairs, missing, undocumented, stale };
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const dirArg = args.indexOf('--dir');
  const dir = path.resolve(dirArg >= 0 ? args[dirArg + 1]! : process.env.KASSA_CONTRACT_LOG ?? DEFAULT_LOG_DIR);
  const observed = await observedPairs(dir);
  if (observed.size === 0) {
    console.error(`No recorded responses in ${dir}. Run the suite with KASSA_CONTRACT_LOG=${path.relative(process.cwd(), dir)} npm test first.`);
    process.exit(1);
  }
  const report = buildReport(await documentedPairs(), observed);
  console.log(report.text);
  if (report.missing.length > 0 || report.undocumented.length > 0) process.exit(1);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
