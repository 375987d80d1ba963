/**
 * `npm run docs`: renders the four OpenAPI documents into self-contained HTML (Redocly
 * `build-docs --inlineBundle`: Redoc's script is inlined, so the pages open offline) in
 * `docs-dist/` (git-ignored), with the bundled documents beside them and an index page.
 * The listeners serve these files at `/docs` (src/docs/docs.ts).
 *
 *   npm run docs                       # every document into docs-dist/
 *   npm run docs -- --out /tmp/d merchant
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DOCS_DIR, DOCUMENT_NAMES, publishedDocument, renderIndex } from '../src/docs/docs.js';
import { loadDocument, OPENAPI_DIR, type DocumentName } from '../src/http/spec.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const redocly = path.join(root, 'node_modules', '.bin', 'redocly');

function parseArgs(argv: string[]): { out: string; names: DocumentName[] } {
  let out = DOCS_DIR;
  const names: DocumentName[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--out') out = path.resolve(argv[++i] ?? '');
    else if ((DOCUMENT_NAMES as readonly string[]).includes(arg)) names.push(arg as DocumentName);
    else throw new Error(`unknown argument ${arg}; expected --out <dir> and document names (${DOCUMENT_NAMES.join(', ')})`);
  }
  return { out, names: names.length > 0 ? names : [...DOCUMENT_NAMES] };
}

/**
 * Redoc's sidebar attribution loads its logo from cdn.redoc.ly at view time (no option turns it
 * off): the pages would not be offline, and every reader's visit would be announced to a third
 * party. The logo becomes an inline SVG wordmark; the attribution and its link stay.
 */
const REDOCLY_LOGO = /https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini(?:-full)?\.svg/g;
const REDOCLY_WORDMARK = `data:image/svg+xml,${encodeURIComponent(
  '<svg xmlns="http://www.w3.org/2000/svg" width="56" height="16" viewBox="0 0 56 16"><text x="0" y="12.5" font-family="system-ui,sans-serif" font-size="13" font-weight="600" fill="#5c6470">Redocly</text></svg>',
)}`;

async function withoutRemoteAssets(file: string): Promise<void> {
  const html = (await readFile(file, 'utf8')).replace(REDOCLY_LOGO, REDOCLY_WORDMARK);
  // A newer Redocly that fetches something else from its CDN, or reports readers' visits, must
  // fail here, not in a reader's browser.
  const remote = /https:\/\/cdn\.redoc\.ly\/[^`'"\s)]*/.exec(html);
  if (remote) throw new Error(`${path.basename(file)} still loads ${remote[0]} at view time; make it local in scripts/docs.ts`);
  if (!html.includes('"disableTelemetry":true')) throw new Error(`${path.basename(file)} was rendered with Redoc's telemetry on`);
  await writeFile(file, html);
}

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    // REDOCLY_TELEMETRY=off: the rendered pages would otherwise report every reader's visit to
    // otel.cloud.redocly.com (Redoc's disableTelemetry follows it), and the CLI its own runs.
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, REDOCLY_TELEMETRY: 'off' } });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${path.basename(command)} ${args.join(' ')} exited with ${code}:\n${output}`))));
  });
}

async function main(): Promise<void> {
  const { out, names } = parseArgs(process.argv.slice(2));
  await mkdir(path.join(out, 'openapi'), { recursive: true });
  const started = performance.now();
  for (const name of names) {
    const t = performance.now();
    const title = String((await loadDocument(name)).info.title ?? name);
    await run(redocly, ['build-docs', path.join(OPENAPI_DIR, `${name}.yaml`), '--inlineBundle', '--title', title, '-o', path.join(out, `${name}.html`)]);
    await withoutRemoteAssets(path.join(out, `${name}.html`));
    const doc = await publishedDocument(name);
    await writeFile(path.join(out, 'openapi', `${name}.yaml`), doc.yaml);
    await writeFile(path.join(out, 'openapi', `${name}.json`), doc.json);
    console.log(`${name}.html (${Math.round(performance.now() - t)} ms)`);
  }
  await writeFile(
    path.join(out, 'index.html'),
    await renderIndex(names.map((name) => ({ name, href: `${name}.html`, raw: `openapi/${name}` }))),
  );
  console.log(`API reference in ${path.relative(process.cwd(), out) || '.'}/index.html (${Math.round(performance.now() - started)} ms)`);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
