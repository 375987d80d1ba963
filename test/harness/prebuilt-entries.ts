/**
 * Compiles the entry points that tests start as child processes (tools/node-entry.ts says how
 * they are used) into one ES module each, with esbuild, the compiler tsx itself runs on.
 *
 * Packages stay external (PGlite, for one, finds its WebAssembly next to its own module), so the
 * folder must sit inside the repository for node_modules to resolve: node_modules/.cache/.
 * `import.meta.url` is replaced in every source file by that file's own URL, so paths built from
 * it (the OpenAPI documents, createRequire) resolve exactly as they do under tsx.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { prebuiltFileName } from '../../tools/node-entry.js';

export const PREBUILT_ENTRY_POINTS = ['src/main.ts', 'scripts/admin.ts'];

const ownModuleUrls: Plugin = {
  name: 'own-module-urls',
  setup(builder) {
    builder.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await readFile(args.path, 'utf8');
      return { contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)), loader: 'ts' };
    });
  },
};

export async function buildPrebuiltEntries(repoRoot: string, outDir: string): Promise<void> {
  await build({
    absWorkingDir: repoRoot,
    entryPoints: PREBUILT_ENTRY_POINTS.map((entry) => ({ in: entry, out: prebuiltFileName(entry).replace(/\.mjs$/, '') })),
    outdir: outDir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Class and function names as written (error names end up in output the tests read).
    keepNames: true,
    plugins: [ownModuleUrls],
    logLevel: 'warning',
  });
}
