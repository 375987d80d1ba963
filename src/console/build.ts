/**
 * Builds the browser console (`web/console/`, Preact) into `web/dist/` with esbuild: one
 * JavaScript and one CSS bundle with content-hashed names under `web/dist/assets/` (each with a
 * brotli `.br` and a gzip `.gz` copy beside it, made here once rather than per request), an
 * `index.html` that names them, and `manifest.json` holding the fingerprint of the sources it was
 * built from. `npm install` builds it (postinstall), `npm start` rebuilds it when the sources
 * changed (the fingerprint differs), the test run builds it once in its global setup. Files are
 * written through a temporary name and renamed, so two processes building at once (or a listener
 * reading meanwhile) never see half a file.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { brotliCompress, constants as zlibConstants, gzip } from 'node:zlib';

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/** The precompressed copies written beside each bundle (`.br`, `.gz`), served by Accept-Encoding (src/console/serve.ts). */
export const PRECOMPRESSED = [
  { encoding: 'br', suffix: '.br' },
  { encoding: 'gzip', suffix: '.gz' },
] as const;

/** Brotli at its best quality and gzip at level 9: done once per build, never per request. */
async function precompress(contents: Uint8Array): Promise<Record<'.br' | '.gz', Buffer>> {
  const [br, gz] = await Promise.all([
    brotli(contents, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: zlibConstants.BROTLI_MAX_QUALITY, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: contents.byteLength } }),
    gzipped(contents, { level: 9 }),
  ]);
  return { '.br': br, '.gz': gz };
}

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CONSOLE_SOURCE_DIR = path.join(REPO_ROOT, 'web', 'console');
export const CONSOLE_DIST_DIR = path.join(REPO_ROOT, 'web', 'dist');
/** Server code the console bundles (pure, dependency-free): the one money formatter. */
const SHARED_SOURCES = [path.join(REPO_ROOT, 'src', 'kernel', 'money.ts')];
/** What the build reads besides web/console: the generated contract types, the shared sources, the locked versions, this file. */
const EXTRA_INPUTS = [...SHARED_SOURCES, path.join(REPO_ROOT, 'package-lock.json'), fileURLToPath(import.meta.url)];

export interface ConsoleManifest {
  fingerprint: string;
  /** Paths under `/console/` of the bundles, e.g. `assets/main-3KQ2ZL7P.js`. */
  script: string;
  style: string;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && !e.name.endsWith('.test.ts') && !e.name.endsWith('.test.tsx'))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

/** SHA-256 over every source file's path and content (generated/ included: the client's types). */
export async function consoleFingerprint(): Promise<string> {
  const hash = createHash('sha256');
  const files = [...(await filesUnder(CONSOLE_SOURCE_DIR)), ...(await filesUnder(path.join(REPO_ROOT, 'generated'))), ...EXTRA_INPUTS];
  for (const file of files) {
    hash.update(path.relative(REPO_ROOT, file)).update('\0').update(await readFile(file)).update('\0');
  }
  return hash.digest('hex');
}

export async function readConsoleManifest(distDir = CONSOLE_DIST_DIR): Promise<ConsoleManifest | undefined> {
  try {
    return JSON.parse(await readFile(path.join(distDir, 'manifest.json'), 'utf8')) as ConsoleManifest;
  } catch {
    return undefined;
  }
}

async function writeAtomically(file: string, contents: string | Uint8Array): Promise<void> {
  const temporary = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(temporary, contents);
  await rename(temporary, file);
}

export function consoleIndexHtml(manifest: Pick<ConsoleManifest, 'script' | 'style'>): string {
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width,initial-scale=1">',
    '<title>Kassa console</title>',
    `<link rel="stylesheet" href="/console/${manifest.style}">`,
    `<script type="module" src="/console/${manifest.script}"></script>`,
    '</head>',
    '<body><div id="app"><noscript>The Kassa console needs JavaScript.</noscript></div></body>',
    '</html>',
    '',
  ].join('\n');
}

/** Builds when the sources changed since the last build (or always with `force`); returns the manifest in force. */
export async function buildConsole(options: { force?: boolean; distDir?: string } = {}): Promise<ConsoleManifest & { built: boolean }> {
  const distDir = options.distDir ?? CONSOLE_DIST_DIR;
  const fingerprint = await consoleFingerprint();
  const previous = await readConsoleManifest(distDir);
  if (!options.force && previous?.fingerprint === fingerprint) {
    const expected = [previous.script, previous.style].flatMap((f) => [f, ...PRECOMPRESSED.map(({ suffix }) => f + suffix)]);
    const present = await Promise.all(expected.map((f) => stat(path.join(distDir, f)).then(() => true, () => false)));
    if (present.every(Boolean)) return { ...previous, built: false };
  }
  // esbuild is loaded only when a build is due: a started listener with an up-to-date build never pays for it.
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: { main: path.join(CONSOLE_SOURCE_DIR, 'main.tsx') },
    bundle: true,
    format: 'esm',
    splitting: false,
    minify: true,
    sourcemap: false,
    target: ['chrome111', 'firefox114', 'safari16.4'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: path.join(CONSOLE_SOURCE_DIR, 'tsconfig.json'),
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    outdir: path.join(distDir, 'assets'),
    write: false,
    metafile: true,
    absWorkingDir: REPO_ROOT,
    legalComments: 'none',
    logLevel: 'silent',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  // A source the bundle reads that the fingerprint does not cover would leave a stale build in place after it changed.
  const covered = new Set([...(await filesUnder(CONSOLE_SOURCE_DIR)), ...(await filesUnder(path.join(REPO_ROOT, 'generated'))), ...EXTRA_INPUTS]);
  const uncovered = Object.keys(result.metafile.inputs)
    .map((input) => path.resolve(REPO_ROOT, input))
    .filter((input) => !input.split(path.sep).includes('node_modules') && !covered.has(input));
  if (uncovered.length > 0) throw new Error(`the console bundles ${uncovered.map((f) => path.relative(REPO_ROOT, f)).join(', ')}, which its fingerprint does not cover: add it to SHARED_SOURCES (src/console/build.ts)`);
  await mkdir(path.join(distDir, 'assets'), { recursive: true });
  let script = '';
  let style = '';
  for (const file of result.outputFiles) {
    // The compressed copies first: a listener that finds the bundle also finds them.
    const compressed = await precompress(file.contents);
    for (const { suffix } of PRECOMPRESSED) await writeAtomically(file.path + suffix, compressed[suffix]);
    await writeAtomically(file.path, file.contents);
    const relative = path.relative(distDir, file.path).split(path.sep).join('/');
    if (relative.endsWith('.js')) script = relative;
    if (relative.endsWith('.css')) style = relative;
  }
  if (!script || !style) throw new Error('the console build produced no script or no stylesheet');
  const manifest: ConsoleManifest = { fingerprint, script, style };
  await writeAtomically(path.join(distDir, 'index.html'), consoleIndexHtml(manifest));
  await writeAtomically(path.join(distDir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  // Keep this build's and the previous build's assets (a page loaded before the rebuild still asks for them).
  const keep = new Set(
    [script, style, previous?.script, previous?.style].filter(Boolean).flatMap((f) => [path.basename(f!), ...PRECOMPRESSED.map(({ suffix }) => path.basename(f!) + suffix)]),
  );
  for (const name of await readdir(path.join(distDir, 'assets'))) {
    if (!keep.has(name) && !name.endsWith('.tmp')) await rm(path.join(distDir, 'assets', name), { force: true });
  }
  return { ...manifest, built: true };
}
