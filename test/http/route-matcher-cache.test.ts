import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { installRouteMatcherCache, routeMatcherCacheActive } from '../../src/http/route-matcher-cache.js';

describe("the validator's route matcher cache", () => {
  it('is installed where express-openapi-validator looks matchers up, and returns equal matchers', () => {
    installRouteMatcherCache();
    // Fails when an upgrade of express-openapi-validator or path-to-regexp makes the cache a
    // no-op: then check whether upstream caches matchers itself (#1217) and drop the module.
    expect(routeMatcherCacheActive()).toBe(true);
    const requireFromValidator = createRequire(createRequire(import.meta.url).resolve('express-openapi-validator'));
    const { pathToRegexp } = requireFromValidator('path-to-regexp') as {
      pathToRegexp: (path: string, options?: object) => { regexp: RegExp; keys: Array<{ name: string }> };
    };
    const a = pathToRegexp('/v1/orders/:id', { sensitive: false, strict: false });
    const b = pathToRegexp('/v1/orders/:id', { sensitive: false, strict: false });
    expect(b).toBe(a);
    expect(pathToRegexp('/v1/orders/:id', { sensitive: true })).not.toBe(a);
    expect(a.regexp.exec('/v1/orders/ORD_1')?.[1]).toBe('ORD_1');
    expect(a.regexp.exec('/v1/orders/ORD_2')?.[1]).toBe('ORD_2');
    expect(a.keys.map((k) => k.name)).toEqual(['id']);
  });
});
