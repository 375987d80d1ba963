/**
 * Finds a request's operation once, for the whole request.
 *
 * Express would walk one route layer per operation, twice (authentication before the body is
 * read, the handler after validation), paying its router's bookkeeping for every layer it tries
 * (up to 2 × 30 on the merchant API). This table matches with the same path-to-regexp options as
 * Express's router (case insensitive, optional trailing slash, `{name}` segments percent-decoded)
 * and keeps its rules:
 * operations are tried in document order, HEAD falls back to GET, and a segment that cannot be
 * percent-decoded is a 400 URIError, as the router throws it.
 */
import { match, type MatchFunction } from 'path-to-regexp';

export interface RoutedRequest<T> {
  entry: T;
  params: Record<string, string>;
}

/** `/v1/orders/{id}` → `/v1/orders/:id` */
const expressPath = (template: string): string => template.replace(/\{([^}]+)\}/g, ':$1');

function decodeParam(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch (err) {
    if (err instanceof URIError) {
      err.message = `Failed to decode param '${value}'`;
      (err as URIError & { status: number }).status = 400;
    }
    throw err;
  }
}

export class OperationTable<T> {
  private readonly byMethod = new Map<string, Array<{ match: MatchFunction<Partial<Record<string, string>>>; entry: T }>>();

  add(method: string, pathTemplate: string, entry: T): void {
    const key = method.toLowerCase();
    let routes = this.byMethod.get(key);
    if (!routes) this.byMethod.set(key, (routes = []));
    routes.push({ match: match(expressPath(pathTemplate), { decode: decodeParam, sensitive: false, trailing: true, end: true }), entry });
  }

  /** The first operation whose method and path template match; throws a 400 URIError on a malformed escape. */
  find(method: string, path: string): RoutedRequest<T> | undefined {
    const key = method.toLowerCase();
    const routes = this.byMethod.get(key) ?? (key === 'head' ? this.byMethod.get('get') : undefined);
    if (!routes) return undefined;
    for (const route of routes) {
      const found = route.match(path);
      if (found) return { entry: route.entry, params: found.params as Record<string, string> };
    }
    return undefined;
  }
}
