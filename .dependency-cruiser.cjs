/**
 * Import rules of the code base (docs/architecture.md explains the layers), checked in CI by
 * `npm run lint:deps`: any violation fails.
 */

/** Business domains: one folder each under src/, wired by their own module. */
const DOMAINS = ['accounts', 'agent-wallet', 'catalog', 'checkout', 'commerce', 'crypto-payments', 'encryption-key', 'orders', 'orgs', 'processors', 'subscriptions', 'telemetry', 'webhooks'];
const DOMAIN = `^src/(${DOMAINS.join('|')})/`;
/** A domain's web edge: its handlers, hosted pages and request authentication use the HTTP framework. */
const WEB_EDGE = '(handlers|-pages|-rate-limit|request-auth|/auth|/errors)\\.ts$';

/** The database drivers (as resolved: type imports of pg land in @types/pg). */
const DRIVERS = '(^|/)node_modules/((@types/)?pg|(@types/)?pg-copy-streams|@electric-sql/pglite|knex-pglite)/';

/** test/database-free.json: files the PostgreSQL run leaves out, and the scripts they start. */
const databaseFree = require('./test/database-free.json').files;
const pathPattern = (file) => `^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
const DATABASE_FREE_TESTS = Object.keys(databaseFree).map(pathPattern);
const DATABASE_FREE_SPAWNED = Object.values(databaseFree).flatMap((entry) => entry.spawns ?? []).map(pathPattern);
const OWN_PROCESS_TESTS = Object.keys(require('./test/own-process.json').files).map(pathPattern);
const DATABASE_FREE_NON_SPAWNING = Object.entries(databaseFree).filter(([, entry]) => !entry.spawns).map(([file]) => pathPattern(file));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A circle of imports (type-only imports included) means two modules are one; break it by moving what both need below them.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'kernel-is-the-bottom',
      severity: 'error',
      comment: 'src/kernel/ (clock, ids, secrets, logger, jobs, domain errors) sits below everything and imports nothing else of the product.',
      from: { path: '^src/kernel/' },
      to: { path: '^(src|generated)/', pathNot: '^src/kernel/' },
    },
    {
      name: 'money-formatter-is-pure',
      severity: 'error',
      comment: 'src/kernel/money.ts is bundled into the browser console too (the one money formatter): it imports nothing, not even Node built-ins.',
      from: { path: '^src/kernel/money\\.ts$' },
      to: {},
    },
    {
      name: 'console-reaches-server-only-through-shared-sources',
      severity: 'error',
      comment:
        "The browser console (web/) is a client of the contract: of the server's code it bundles only the pure sources its build fingerprints (SHARED_SOURCES in src/console/build.ts: the money formatter).",
      from: { path: '^web/' },
      to: { path: '^(src|scripts|tools|test)/', pathNot: '^src/kernel/money\\.ts$' },
    },
    {
      name: 'domain-not-to-http',
      severity: 'error',
      comment:
        "src/http/ is framework code: a domain's services, repositories and model never import it (domain errors live in src/kernel/; the HTTP layer maps them to the envelope). Only the domain's web edge (handlers, hosted pages, request authentication) does.",
      from: { path: DOMAIN, pathNot: WEB_EDGE },
      to: { path: '^src/http/' },
    },
    {
      name: 'http-not-to-domains',
      severity: 'error',
      comment: 'src/http/ knows no domain: the composition (src/apps.ts) hands domains to it.',
      from: { path: '^src/http/' },
      to: { path: DOMAIN },
    },
    {
      name: 'knex-only-in-repositories',
      severity: 'error',
      comment: 'Only repositories (*.repository.ts) and src/db/ speak knex; services see repository interfaces.',
      from: { path: '^src/', pathNot: ['^src/db/', '\\.repository\\.ts$'] },
      to: { path: '(^|/)node_modules/knex/' },
    },
    {
      name: 'drivers-only-in-db',
      severity: 'error',
      comment: 'The PostgreSQL / PGlite drivers are opened and configured by src/db/ alone.',
      from: { path: '^src/', pathNot: '^src/db/' },
      to: { path: DRIVERS },
    },
    {
      name: 'product-not-to-tooling',
      severity: 'error',
      comment: 'Product code (src/) never imports tests, scripts or the test and benchmark tools.',
      from: { path: '^src/' },
      to: { path: '^(test|scripts|tools)/' },
    },
    {
      name: 'generated-types-only',
      severity: 'error',
      comment: 'generated/ is openapi-typescript output: types only (`import type`), never loaded at run time.',
      from: {},
      to: { path: '^generated/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'database-free-tests-reach-no-database',
      severity: 'error',
      comment:
        'A file test/database-free.json lists (the PostgreSQL run leaves it out), or a script it starts, reaches a database: a driver, knex, src/db/, the test database harness, or Kassa as a process. Take it off the list.',
      from: { path: [...DATABASE_FREE_TESTS, ...DATABASE_FREE_SPAWNED] },
      to: { path: [DRIVERS, '(^|/)node_modules/knex/', '^src/db/', '^test/harness/(database|context)\\.ts$', '^tools/(cluster|node-entry)\\.ts$'], reachable: true },
    },
    {
      name: 'database-free-tests-start-no-process',
      severity: 'error',
      comment: 'A file test/database-free.json lists starts child processes without naming the scripts it starts ("spawns"), so nothing proves they touch no database.',
      from: { path: DATABASE_FREE_NON_SPAWNING },
      to: { path: '^(node:)?child_process$', reachable: true },
    },
    {
      name: 'hardhat-tests-in-own-process',
      severity: 'error',
      comment:
        'A test file that reaches Hardhat must run in a worker process of its own (Hardhat keeps one runtime per process; the other files share their workers): list it in test/own-process.json.',
      from: { path: '^test/.*\\.test\\.ts$', pathNot: OWN_PROCESS_TESTS },
      to: { path: '(^|/)node_modules/hardhat/', reachable: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to no file or package.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Type-only imports count: a circle through `import type` is still a circle of the design.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    // node_modules may be a symbolic link (git worktrees); report paths as the repository sees them.
    preserveSymlinks: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: {
      dot: {
        collapsePattern: 'node_modules/(@[^/]+/[^/]+|[^/]+)',
      },
    },
  },
};
