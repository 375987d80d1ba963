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
import { mkdir, writeFile } from 'node:fs/promises';
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

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
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
