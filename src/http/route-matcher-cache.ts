/**
 * express-openapi-validator 5.6 compiles a path-to-regexp matcher for every documented route on
 * every request while it looks for the request's operation (openapi.metadata.js `lookupRoute`;
 * the cost is in docs/benchmarks.md). Until the upstream fix ships
 * (cdimascio/express-openapi-validator#1217), the compiled matchers are memoized where the
 * validator looks them up: the `pathToRegexp` export of the path-to-regexp module it loads.
 *
 * Safe because pathToRegexp is a pure function of (path, options) and its result — a RegExp
 * without the g/y flags plus its keys — is only read by callers. The cache is bounded by the
 * number of distinct routes the validator knows (documented routes, not request URLs).
 * `routeMatcherCacheActive()` lets a test notice when an upgrade makes this a no-op.
 */
import { createRequire } from 'node:module';

type PathToRegexp = (path: string, options?: Record<string, unknown>) => unknown;

const MEMOIZED = Symbol.for('kassa.memoizedPathToRegexp');
let installed = false;

/**
 * The validator passes `{ sensitive, strict }` booleans, up to 30 times per request: those get a
 * two-character key instead of a JSON.stringify each time; any other options their JSON text.
 */
function optionsKey(options: Record<string, unknown> | undefined): string {
  if (options === undefined) return '{}';
  const keys = Object.keys(options);
  if (keys.length === 2 && typeof options.sensitive === 'boolean' && typeof options.strict === 'boolean') {
    return `${options.sensitive ? 'S' : 's'}${options.strict ? 'T' : 't'}`;
  }
  return JSON.stringify(options);
}

export function installRouteMatcherCache(): void {
  if (installed) return;
  installed = true;
  const requireFromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
  const module = requireFromValidator('path-to-regexp') as { pathToRegexp: PathToRegexp & { [MEMOIZED]?: true } };
  const original = module.pathToRegexp;
  if (typeof original !== 'function' || original[MEMOIZED]) return;
  const cache = new Map<string, unknown>();
  const memoized = ((path: string, options?: Parameters<PathToRegexp>[1]) => {
    if (typeof path !== 'string') return original(path, options);
    const key = `${optionsKey(options)} ${path}`;
    let compiled = cache.get(key);
    if (compiled === undefined) {
      compiled = original(path, options);
      // Only the validator's route lookups are worth keeping; a runaway number of keys would mean
      // someone compiles request URLs, which the cache must not grow with.
      if (cache.size < 10_000) cache.set(key, compiled);
    }
    return compiled;
  }) as PathToRegexp & { [MEMOIZED]?: true };
  memoized[MEMOIZED] = true;
  module.pathToRegexp = memoized;
}

export function routeMatcherCacheActive(): boolean {
  const requireFromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
  const module = requireFromValidator('path-to-regexp') as { pathToRegexp: { [MEMOIZED]?: true } };
  return module.pathToRegexp[MEMOIZED] === true;
}
