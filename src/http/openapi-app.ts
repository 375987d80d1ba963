/**
 * Builds an Express app from a composed OpenAPI document and a handler map:
 * request id → access log → health → extra routes → authentication (by the operation's security
 * requirement) → JSON body (or an operation's BodyCodec: OTLP protobuf) → express-openapi-validator
 * → byte limits → handler → one error mapping.
 */
import { isUtf8 } from 'node:buffer';
import express, { type Express, type NextFunction, type Request, type Response, Router } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Logger } from '../kernel/logger.js';
import type { Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';
import { AppError, validationError } from '../kernel/errors.js';
import { envelopeBody, statusOf, telemetryBody, toAppError } from './errors.js';
import { HTTP_METHODS, listOperations, type OpenApiDocument, type OperationInfo } from './spec.js';
import type { AnyHandler } from './typed-handler.js';
import { checkByteLimits } from './byte-limits.js';
import { contractRecorder } from './contract-log.js';
import { installRouteMatcherCache } from './route-matcher-cache.js';
import { installSchemaCompileScope } from './schema-compile-scope.js';
import { OperationTable, type RoutedRequest } from './operation-table.js';
import { parameterFastPath, type FastPathCheck } from './parameter-fast-path.js';
import type { HttpMetrics } from '../observability/metrics.js';

/**
 * Resolves one security scheme; returns the caller's identity or throws AppError. An authenticator
 * that found none of its credentials in the request throws one marked by `credentialsAbsent`:
 * when an operation accepts several schemes, another scheme's error is reported instead.
 */
export const credentialsAbsent = <E extends Error>(error: E): E => Object.assign(error, { credentialsAbsent: true });

/** Methods that never change state: they do not pin the caller's reads to the primary. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export type Authenticator = (req: Request, op: OperationInfo) => Promise<unknown>;

export type ErrorFlavor = 'envelope' | 'telemetry';

export interface OpenApiAppOptions {
  name: string;
  document: OpenApiDocument;
  handlers: Record<string, AnyHandler>;
  authenticators: Record<string, Authenticator>;
  logger: Logger;
  clock: Clock;
  /** Validate every response against the document (on in tests: any drift fails). */
  validateResponses: boolean;
  /** Largest JSON body accepted for this request. */
  bodyLimit: (req: Request) => number;
  errorFlavor: (req: Request) => ErrorFlavor;
  /** Routes outside the contract (health, hosted pages, docs), mounted before validation. */
  extraRoutes?: (router: Router) => void;
  readiness: () => Promise<void>;
  /** Express `trust proxy`: how many proxies' X-Forwarded-* to believe (0: none). */
  trustProxy?: number;
  /**
   * Lets an API turn a generic error into a more specific one before it is rendered (the
   * telemetry API reports schema errors inside `traces[]` as `invalid_trace`, and those of
   * `metric`/`interval`/`aggregation` as `invalid_metric`/…). Gets what was thrown and the request.
   */
  refineError?: (error: AppError, thrown: unknown, req: Request) => AppError;
  /** Request duration histogram by operationId and status (src/observability/metrics.ts). */
  metrics?: HttpMetrics;
  /** Send Strict-Transport-Security (the listener's public URL is https). */
  hsts?: boolean;
  /** Request encodings besides JSON, by operationId (OTLP/HTTP protobuf). */
  bodyCodecs?: Record<string, BodyCodec>;
  /**
   * Let requests with only plain string parameters and no body that pass the same checks skip
   * express-openapi-validator (src/http/parameter-fast-path.ts). Default true; tests turn it off
   * to compare.
   */
  parameterFastPath?: boolean;
  /**
   * Told of each authenticated request that may write (any method but GET, HEAD and OPTIONS), by
   * organization, from its authentication until its response is done: that organization's
   * lag-tolerant reads stay on the primary meanwhile and until a replica has caught up with it
   * (read-your-writes, src/db/replicas.ts).
   */
  writes?: { begin(caller: string): () => void };
}

/**
 * A binary encoding of an operation's body: decoded to the JSON form the document validates (so
 * every rule of the contract applies to it unchanged), and a success answer encoded back in it.
 * Error answers stay JSON.
 */
export interface BodyCodec {
  mediaType: string;
  decodeRequest: (raw: Buffer) => unknown;
  encodeResponse: (body: unknown) => Buffer;
}

declare module 'express-serve-static-core' {
  interface Request {
    requestId: string;
    /** Set by the JSON parser when the raw body spells a \uD8xx-\uDFxx escape. */
    mayHoldLoneSurrogate?: boolean;
    /** The OpenAPI operation the request matched (metrics label), once routing has found it. */
    operationId?: string;
    /** Set when the body came in a BodyCodec's encoding: the success answer goes back in it. */
    bodyCodec?: BodyCodec;
    /** The documented operation this request matched, with its decoded path parameters. */
    documented?: RoutedRequest<DocumentedOperation>;
    /** Its parameters passed the fast path's checks: express-openapi-validator is skipped. */
    parametersChecked?: boolean;
    auth?: unknown;
    log: Logger;
  }
}

/** What the pipeline needs of an operation, worked out once at start-up. */
interface DocumentedOperation {
  op: OperationInfo;
  handler: AnyHandler;
  integerQuery: string[];
  headerNames: string[];
  fastPath: FastPathCheck | undefined;
}

const REQUEST_ID_PATTERN = /^[A-Za-z0-9_.:-]{8,128}$/;

/** With the u flag a surrogate pair is one code point: this matches only a lone half. */
const LONE_SURROGATE = /\p{Surrogate}/u;
const wellFormed = (text: string): boolean => !LONE_SURROGATE.test(text);

/** Every string (keys included) of a parsed JSON value is well-formed UTF-16. */
function wellFormedJson(value: unknown): boolean {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.every(wellFormedJson);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).every(([key, v]) => wellFormed(key) && wellFormedJson(v));
  }
  return true;
}

/** Names of an operation's integer query parameters. */
function integerQueryParameters(op: OperationInfo): string[] {
  const parameters = (op.operation.parameters as Array<{ in: string; name: string; schema?: { type?: unknown } }> | undefined) ?? [];
  return parameters.filter((p) => p.in === 'query' && p.schema?.type === 'integer').map((p) => p.name);
}

const DECIMAL_INTEGER = /^[+-]?[0-9]+$/;

/**
 * The validator coerces query strings with Number(), which also reads `1e3`, `0x10`, ` 1` and
 * `1e999` (Infinity, which then passes its integer check). An integer parameter is written in
 * decimal digits; anything else is 400 before the validator sees it.
 */
function checkIntegerQuery(names: string[], req: Request): void {
  for (const name of names) {
    const value = (req.query as Record<string, unknown>)[name];
    if (value === undefined) continue;
    if (typeof value !== 'string' || !DECIMAL_INTEGER.test(value)) {
      throw new AppError('VALIDATION_ERROR', `query.${name} must be an integer in decimal digits`);
    }
  }
}

/**
 * Query values are decoded once, by the query parser, as HTML forms and URL libraries encode them:
 * `+` and `%20` are spaces, `%2B` is a plus. The validator would otherwise also scan the raw query
 * and refuse any reserved character in it (`+` included) unless the parameter has `allowReserved`,
 * so its copy of the document gives every query parameter that flag and it validates the decoded
 * value. The published documents do not carry the flag: it would tell clients not to encode.
 */
function validateDecodedQueries(document: OpenApiDocument): OpenApiDocument {
  type Parameter = { in?: string; allowReserved?: boolean };
  for (const item of Object.values(document.paths)) {
    const lists = [item.parameters, ...HTTP_METHODS.map((method) => (item[method] as { parameters?: unknown } | undefined)?.parameters)];
    for (const list of lists) {
      for (const parameter of (list as Parameter[] | undefined) ?? []) if (parameter.in === 'query') parameter.allowReserved = true;
    }
  }
  return document;
}

/**
 * express-openapi-validator 5.6's middlewares by function name: those that only check a request
 * (security and multipart do nothing here) and those that find its route. Any other (a response
 * stage, one a new version adds) always runs; test/http/parameter-fast-path.test.ts notices a rename.
 */
export const REQUEST_STAGES = new Set(['securityMiddleware', 'multipartMiddleware', 'requestMiddleware']);
export const LOOKUP_STAGES = new Set(['pathParamsMiddleware', 'metadataMiddleware']);

type DocumentValidator = ReturnType<typeof OpenApiValidator.middleware>;

/**
 * One validator per document and response mode, kept for the process: express-openapi-validator
 * compiles an ajv schema per route and status on first use, each a walk of the whole dereferenced
 * document, so apps made from the same document (the test harness makes them per file) share what
 * was compiled instead of compiling it again. Nothing in it belongs to one app.
 */
const documentValidators = new WeakMap<OpenApiDocument, Map<boolean, DocumentValidator>>();

function documentValidator(document: OpenApiDocument, validateResponses: boolean): DocumentValidator {
  let byMode = documentValidators.get(document);
  if (!byMode) documentValidators.set(document, (byMode = new Map()));
  let validator = byMode.get(validateResponses);
  if (!validator) {
    validator = OpenApiValidator.middleware({
      apiSpec: validateDecodedQueries(structuredClone(document)) as never,
      validateApiSpec: true,
      // coerceTypes applies to bodies only (query and path parameters are always coerced by the
      // library): a body is taken as sent, so `null` or `"12"` never silently become `""` or 12.
      validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false, removeAdditional: false },
      validateResponses: validateResponses
        ? {
            removeAdditional: false,
            onError: (error, body, req) => {
              (req as Request).log?.error({ err: error, body }, 'response does not match the OpenAPI document');
              throw error;
            },
          }
        : false,
      validateSecurity: false,
      validateFormats: true,
      ignoreUndocumented: false,
    });
    byMode.set(validateResponses, validator);
  }
  return validator;
}

export function createOpenApiApp(options: OpenApiAppOptions): Express {
  const { logger, clock } = options;
  // Response validation wraps res.json, so with it on every answer goes through res.json.
  const sendJson = options.validateResponses ? (res: Response, status: number, body: unknown) => void res.status(status).json(body) : writeJson;
  const recordContract = contractRecorder();
  installRouteMatcherCache();
  installSchemaCompileScope();
  const app = express();
  app.disable('x-powered-by');
  // No ETag: the contract has no conditional requests, and Express would hash every body to make one.
  app.set('etag', false);
  app.set('trust proxy', options.trustProxy ?? 0);
  app.set('query parser', 'extended');

  app.use((req, res, next) => {
    const inbound = req.header('x-request-id');
    req.requestId = inbound && REQUEST_ID_PATTERN.test(inbound) ? inbound : `req_${randomToken()}`;
    res.setHeader('X-Request-Id', req.requestId);
    // JSON and pages alike: never let a browser guess another content type.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // Meaningful only over https (a TLS-terminating load balancer passes it through).
    if (options.hsts) res.setHeader('Strict-Transport-Security', 'max-age=31536000');
    req.log = logger.child({ app: options.name, requestId: req.requestId });
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      req.log[accessLogLevel(req, res.statusCode)]({ method: req.method, route: routeOf(req), status: res.statusCode, ms: Math.round(ms * 10) / 10 }, 'request');
      options.metrics?.observeHttp({ app: options.name, operation: operationLabel(req), method: req.method, status: res.statusCode, seconds: ms / 1000 });
      // A HEAD request reaches a GET operation's route but is not that documented operation.
      if (req.operationId && req.documented?.entry.op.method === req.method.toLowerCase()) recordContract?.(req.operationId, res.statusCode);
    });
    // The client hung up before the answer was sent: logged and timed as 499, nginx's "client
    // closed request" (the status the handler would have sent is not known yet).
    res.on('close', () => {
      if (res.writableFinished) return;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      req.log.info({ method: req.method, route: routeOf(req), status: 499, ms: Math.round(ms * 10) / 10 }, 'request aborted by the client');
      options.metrics?.observeHttp({ app: options.name, operation: operationLabel(req), method: req.method, status: 499, seconds: ms / 1000 });
    });
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ success: true, message: 'ok', data: { status: 'ok' } });
  });
  app.get('/readyz', async (req, res) => {
    try {
      await options.readiness();
      res.json({ success: true, message: 'ready', data: { status: 'ready' } });
    } catch (err) {
      // Starting: not a fault, not worth a warning (a load balancer polls it from the first moment).
      const starting = err instanceof Error && err.message === 'Kassa is starting';
      if (!starting) req.log.warn({ err }, 'readiness check failed');
      res.status(503).json(envelopeBody(new AppError('SERVICE_UNAVAILABLE', starting ? 'Kassa is starting' : 'Database unreachable')));
    }
  });

  // Each documented operation, found once per request (src/http/operation-table.ts).
  const table = new OperationTable<DocumentedOperation>();
  for (const op of listOperations(options.document)) {
    const handler = options.handlers[op.operationId];
    if (!handler) throw new Error(`${options.name}: no handler for operation ${op.operationId}`);
    table.add(op.method, op.path, {
      op,
      handler,
      integerQuery: integerQueryParameters(op),
      // Handlers see declared header parameters under their documented names ('Idempotency-Key').
      headerNames: ((op.operation.parameters as Array<{ in: string; name: string }> | undefined) ?? []).filter((p) => p.in === 'header').map((p) => p.name),
      fastPath: options.parameterFastPath === false ? undefined : parameterFastPath(options.document, op),
    });
  }

  // Authentication runs before body parsing and validation: an unauthenticated caller learns
  // nothing about the request's shape, and never makes us parse a large body.
  app.use(async (req: Request, res: Response, next: NextFunction) => {
    try {
      const routed = table.find(req.method, req.path);
      if (!routed) return next();
      req.documented = routed;
      req.operationId = routed.entry.op.operationId;
      req.auth = await authenticate(req, routed.entry.op, options.authenticators);
      const caller = (req.auth as { orgId?: unknown } | undefined)?.orgId;
      if (options.writes && typeof caller === 'string' && !SAFE_METHODS.has(req.method)) res.once('close', options.writes.begin(caller));
      checkIntegerQuery(routed.entry.integerQuery, req);
      next();
    } catch (err) {
      next(err);
    }
  });

  // Routes outside the contract (pages, docs) never share a path with an operation, so a request
  // that matched one skips their router.
  if (options.extraRoutes) {
    const extra = Router();
    options.extraRoutes(extra);
    app.use((req, res, next) => (req.documented ? next() : extra(req, res, next)));
  }

  // A codec's body is read raw (gzip and deflate inflated, the limit applying to the inflated
  // bytes, so a compression bomb stops at the limit) and decoded before validation.
  const rawParsers = new Map<number, express.RequestHandler>();
  app.use((req, res, next) => {
    const codec = req.documented && options.bodyCodecs?.[req.documented.entry.op.operationId];
    if (!codec || !req.is(codec.mediaType)) return next();
    const limit = options.bodyLimit(req);
    let parser = rawParsers.get(limit);
    if (!parser) rawParsers.set(limit, (parser = express.raw({ limit, type: () => true })));
    parser(req, res, (err?: unknown) => {
      if (err) return next(err);
      if (req.body === undefined && announcesBody(req) && req.socket?.readable !== true) {
        return next(Object.assign(new Error('request aborted'), { type: 'request.aborted', status: 400 }));
      }
      try {
        req.body = codec.decodeRequest(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
      } catch (decodeError) {
        return next(decodeError);
      }
      // From here on the request is its JSON form: the validator checks it against the JSON schema.
      req.headers['content-type'] = 'application/json';
      req.bodyCodec = codec;
      next();
    });
  });

  const parsers = new Map<number, express.RequestHandler>();
  app.use((req, res, next) => {
    if (req.bodyCodec) return next();
    // What body-parser checks first (type-is hasBody): no length, no chunks, no body. Skipping it
    // here saves its per-request setup on every GET.
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return next();
    const limit = options.bodyLimit(req);
    let parser = parsers.get(limit);
    if (!parser) {
      parser = express.json({
        limit,
        strict: true,
        type: ['application/json', 'application/*+json'],
        // Only a body that spells a surrogate escape can parse into ill-formed Unicode (raw UTF-8
        // cannot carry a lone surrogate): one native search, and the walk only when it hits.
        verify: (req, _res, raw, encoding) => {
          // body-parser decodes with replacement characters: a non-UTF-8 byte would be stored as
          // U+FFFD. isUtf8 is one native pass (simdutf) and allocates nothing.
          if (encoding === 'utf-8' && !isUtf8(raw)) throw validationError('The request body is not valid UTF-8; JSON must be sent in UTF-8', { field: 'body' });
          if (raw.indexOf('\\ud') !== -1 || raw.indexOf('\\uD') !== -1) (req as Request).mayHoldLoneSurrogate = true;
        },
      });
      parsers.set(limit, parser);
    }
    parser(req, res, (err?: unknown) => {
      // body-parser skips a request whose client is already gone (it hung up while we were
      // authenticating) and leaves no body; the validator would then let a required body through.
      if (!err && req.body === undefined && announcesBody(req) && req.socket?.readable !== true) {
        return next(Object.assign(new Error('request aborted'), { type: 'request.aborted', status: 400 }));
      }
      // Every documented body is an object; said first, not as a rule of the object's fields.
      if (!err && req.documented && Array.isArray(req.body)) {
        return next(validationError('The request body must be a JSON object, not an array', { field: 'body' }));
      }
      // A lone \uD800-\uDFFF escape is valid JSON but not Unicode: canonical JSON (RFC 8785),
      // UTF-8 and PostgreSQL's json all refuse it, so it is refused here, before anything runs.
      if (!err && req.mayHoldLoneSurrogate && !wellFormedJson(req.body)) {
        return next(new AppError('VALIDATION_ERROR', 'Text values must be well-formed Unicode: a \\uD800-\\uDFFF escape must be half of a surrogate pair'));
      }
      next(err);
    });
  });

  app.use((req, _res, next) => {
    const routed = req.documented;
    if (routed?.entry.fastPath && !req.bodyCodec) req.parametersChecked = routed.entry.fastPath(req, routed.params);
    next();
  });

  const validator = documentValidator(options.document, options.validateResponses);
  // A request whose parameters the fast path checked skips the validator's request stages; with
  // response validation on (tests), the route lookup stays, as the response stage needs it.
  const skipped = options.validateResponses ? REQUEST_STAGES : new Set([...REQUEST_STAGES, ...LOOKUP_STAGES]);
  app.use(
    validator.map((middleware) =>
      skipped.has(middleware.name) ? (req: Request, res: Response, next: NextFunction) => (req.parametersChecked ? next() : middleware(req, res, next)) : middleware,
    ),
  );

  app.use(async (req: Request, res: Response, next: NextFunction) => {
    const routed = req.documented;
    if (!routed) return next();
    const { op, handler, headerNames } = routed.entry;
    try {
      checkByteLimits(op, req);
      const result = await handler({
        params: routed.params as never,
        query: req.query as never,
        headers: Object.fromEntries(headerNames.map((name) => [name, req.header(name)])) as never,
        body: req.body,
        auth: req.auth,
        requestId: req.requestId,
        req,
      });
      for (const [name, value] of Object.entries(result.headers ?? {})) res.setHeader(name, value);
      if (result.status === 204) res.status(204).end();
      else if (req.bodyCodec) {
        const bytes = req.bodyCodec.encodeResponse(result.body);
        res.status(result.status).setHeader('Content-Type', req.bodyCodec.mediaType);
        res.setHeader('Content-Length', bytes.length);
        res.end(bytes);
      } else sendJson(res, result.status, result.body);
    } catch (err) {
      next(err);
    }
  });

  app.use((_req, _res, next) => next(new AppError('NOT_FOUND', 'Route not found')));

  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  app.use((thrown: unknown, req: Request, res: Response, _next: NextFunction) => {
    const mapped = toAppError(thrown, (req as Request & { openapi?: { schema?: unknown } }).openapi?.schema);
    const { internal } = mapped;
    const error = options.refineError && !internal ? options.refineError(mapped.error, thrown, req) : mapped.error;
    const log = req.log ?? logger;
    if (internal) log.error({ err: thrown }, 'unhandled error');
    else if (statusOf(error) >= 500) log.warn({ err: thrown, code: error.code }, 'request failed');
    if (res.headersSent) return;
    for (const [name, value] of Object.entries(error.options.headers ?? {})) res.setHeader(name, value);
    sendJson(res, statusOf(error), options.errorFlavor(req) === 'telemetry' ? telemetryBody(error, req.requestId, clock.now()) : envelopeBody(error));
  });

  return app;
}

/**
 * What res.status(status).json(body) sends, byte for byte and header for header (no ETag: it is
 * off; a 304 cannot happen without one), without Express's per-call content-type parsing and
 * settings lookups on every answer.
 */
export function writeJson(res: Response, status: number, body: unknown): void {
  const text = JSON.stringify(body) ?? '';
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  if (res.req.method === 'HEAD') res.end();
  else res.end(text);
}

const announcesBody = (req: Request): boolean =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/**
 * The metrics label of a request: its operationId; for routes outside the contract (hosted
 * pages, health) the route pattern, never the raw path (ids and tokens would explode the series).
 */
function operationLabel(req: Request): string {
  if (req.operationId) return req.operationId;
  const route = (req as Request & { route?: { path?: unknown } }).route?.path;
  return typeof route === 'string' ? route : 'unmatched';
}

/**
 * What the access log names a request by: its route pattern, never its path or query. Paths carry
 * bearer tokens (`/subscriptions/manage/<token>` cancels a subscription, `/checkout/<token>` shows
 * the buyer's e-mail) and ids; queries e-mail addresses and references. Documented operations by
 * their OpenAPI path (`/v1/orders/{orderId}`), other routes by their Express pattern in the same
 * notation (`/checkout/{token}`), a request no route took as `(unmatched)`.
 */
function routeOf(req: Request): string {
  if (req.documented) return req.documented.entry.op.path;
  const route = (req as Request & { route?: { path?: unknown } }).route?.path;
  return typeof route === 'string' ? route.replace(/:(\w+)/g, '{$1}') : '(unmatched)';
}

/**
 * Operations marked `x-access-log: debug` in their document are polled (the `webhook listen` feed,
 * once a second): their successful requests are logged at debug level so they do not drown the log.
 */
function accessLogLevel(req: Request, status: number): 'info' | 'debug' {
  return status < 400 && req.documented?.entry.op.operation['x-access-log'] === 'debug' ? 'debug' : 'info';
}

/**
 * Security requirements are OR'ed; the schemes inside one requirement are AND'ed. An empty
 * requirement (`{}`) beside others makes the credentials optional: they are resolved when they
 * hold, and a caller without (or with stale) credentials comes through as anonymous (undefined).
 */
async function authenticate(
  req: Request,
  op: OperationInfo,
  authenticators: Record<string, Authenticator>,
): Promise<unknown> {
  const named = op.security.filter((requirement) => Object.keys(requirement).length > 0);
  if (named.length === 0) return undefined;
  if (named.length < op.security.length) {
    try {
      return await authenticate(req, { ...op, security: named }, authenticators);
    } catch (err) {
      if (err instanceof AppError && err.code === 'UNAUTHORIZED') return undefined;
      throw err;
    }
  }
  // Made only when every requirement failed: an Error captures a stack trace, on every request otherwise.
  let lastError: unknown;
  for (const requirement of op.security) {
    try {
      let identity: unknown;
      for (const scheme of Object.keys(requirement)) {
        const authenticator = authenticators[scheme];
        if (!authenticator) throw new Error(`no authenticator for security scheme ${scheme}`);
        identity = await authenticator(req, op);
      }
      return identity;
    } catch (err) {
      // A scheme whose credentials were not sent at all says less than one that refused them:
      // a key without the permission stays 403 though the cookie alternative found no cookie.
      if (lastError === undefined || !(err as { credentialsAbsent?: boolean }).credentialsAbsent) lastError = err;
    }
  }
  throw lastError ?? new AppError('UNAUTHORIZED', 'Unauthorized');
}
