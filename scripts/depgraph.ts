/**
 * `npm run depgraph`: the module graph of src/ as an SVG (docs/architecture/modules.svg, drawn by
 * Graphviz `dot`) and the figures that tell whether the architecture holds: modules, import
 * circles, imports between domains and the domain pairs that import each other.
 *
 * `--figures` prints the figures only (no Graphviz needed); with `--check` it also fails when a
 * domain folder imports one that imports it back, directly or around a circle (module circles
 * are dependency-cruiser's `no-circular`). `npm run lint:deps` runs both checks.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEPCRUISE = path.join(REPO_ROOT, 'node_modules', '.bin', 'depcruise');
const SVG = path.join(REPO_ROOT, 'docs', 'architecture', 'modules.svg');
/** Folders under src/ that are not business domains. */
const NOT_DOMAINS = new Set(['http', 'pages', 'kernel', 'db', 'client', 'docs', 'observability']);

interface Module {
  source: string;
  dependencies: Array<{ resolved: string; dependencyTypes: string[]; coreModule: boolean; couldNotResolve: boolean }>;
}

function cruise(outputType: string, ...args: string[]): string {
  return execFileSync(DEPCRUISE, ['src', '--config', '.dependency-cruiser.cjs', '--output-type', outputType, ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** Tarjan's strongly connected components with more than one node (plus self-loops): the circles. */
function circles(graph: Map<string, Set<string>>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, counter);
    low.set(node, counter++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || graph.get(node)?.has(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

const folderOf = (file: string): string => {
  const parts = file.split('/');
  return parts.length > 2 ? parts[1]! : '(composition)';
};

function figures(): { text: string; folderCircles: string[][] } {
  const modules = (JSON.parse(cruise('json')) as { modules: Module[] }).modules.filter((m) => m.source.startsWith('src/'));
  const graph = new Map<string, Set<string>>();
  const folders = new Map<string, Set<string>>();
  let imports = 0;
  let crossDomain = 0;
  const isDomain = (folder: string) => folder !== '(composition)' && !NOT_DOMAINS.has(folder);
  for (const m of modules) {
    const targets = new Set(m.dependencies.map((dep) => dep.resolved).filter((to) => to.startsWith('src/')));
    graph.set(m.source, targets);
    imports += targets.size;
    for (const target of targets) {
      const [from, to] = [folderOf(m.source), folderOf(target)];
      if (from === to || !isDomain(from) || !isDomain(to)) continue;
      crossDomain++;
      if (!folders.has(from)) folders.set(from, new Set());
      folders.get(from)!.add(to);
    }
  }
  const moduleCircles = circles(graph);
  const pairs = [...folders].flatMap(([from, tos]) => [...tos].filter((to) => from < to && folders.get(to)?.has(from)).map((to) => `${from} ↔ ${to}`));
  const folderCircles = circles(folders);
  const text = [
    `modules in src/: ${modules.length} (${imports} imports between them)`,
    `import circles (type-only imports included): ${moduleCircles.length}, through ${moduleCircles.reduce((n, c) => n + c.length, 0)} modules`,
    ...moduleCircles.map((c) => `  ${c.join(', ')}`),
    `imports from one domain into another: ${crossDomain} (domains: the folders of src/ except ${[...NOT_DOMAINS].join(', ')})`,
    `domain pairs importing each other: ${pairs.length}${pairs.length ? ` (${pairs.join(', ')})` : ''}`,
    `domain folders in circles: ${folderCircles.map((c) => c.join(' → ')).join('; ') || 'none'}`,
  ].join('\n');
  return { text, folderCircles };
}

const { text, folderCircles } = figures();
process.stdout.write(`${text}\n`);
if (process.argv.includes('--check') && folderCircles.length > 0) {
  process.stderr.write('domain folders import each other in a circle: move what both need into commerce/ or kernel/, or invert the dependency\n');
  process.exit(1);
}
if (!process.argv.includes('--figures')) {
  // The product's own modules; packages would double the picture and say little.
  const dotSource = cruise('dot', '--include-only', '^src/');
  const rendered = spawnSync('dot', ['-Tsvg'], { input: dotSource, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (rendered.error || rendered.status !== 0) {
    process.stderr.write(`Graphviz \`dot\` is needed to draw the graph (Debian: apt-get install graphviz): ${rendered.error?.message ?? rendered.stderr}\n`);
    process.exit(1);
  }
  mkdirSync(path.dirname(SVG), { recursive: true });
  writeFileSync(SVG, rendered.stdout);
  process.stdout.write(`wrote ${path.relative(REPO_ROOT, SVG)}\n`);
}
