/**
 * The one place where anything thrown turns into an HTTP error: AppError for our own rules,
 * express-openapi-validator and body-parser errors for the contract, database errors for outages.
 */
import type { components as Merchant } from '../../generated/merchant.js';
import type { components as Telemetry } from '../../generated/telemetry.js';

import { AppError, serviceUnavailable, unauthorized, validationError, type ErrorCode, type TelemetryErrorCode } from '../kernel/errors.js';

export type ErrorEnvelope = Merchant['schemas']['ErrorEnvelope'];
export type TelemetryErrorBody = Telemetry['schemas']['TelemetryError'];

// The kernel's code lists are the documents' lists: a code added to one and not the other fails here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const errorCodesMatch: Same<ErrorCode, Merchant['schemas']['ErrorCode']> = true;
const telemetryCodesMatch: Same<TelemetryErrorCode, Telemetry['schemas']['TelemetryErrorCode']> = true;
void errorCodesMatch;
void telemetryCodesMatch;

const STATUS_OF: Record<ErrorCode, number> = {
  VALIDATION_ERROR: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  SECOND_FACTOR_REQUIRED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  NOT_IMPLEMENTED: 501,
  SERVICE_UNAVAILABLE: 503,
};

/** The telemetry API speaks lowercase codes; these are its defaults for each of ours. */
const TELEMETRY_CODE_OF: Record<ErrorCode, TelemetryErrorCode> = {
  VALIDATION_ERROR: 'invalid_request',
  UNAUTHORIZED: 'unauthorized',
  FORBIDDEN: 'unauthorized',
  SECOND_FACTOR_REQUIRED: 'unauthorized',
  NOT_FOUND: 'not_found',
  METHOD_NOT_ALLOWED: 'method_not_allowed',
  CONFLICT: 'conflict',
  IDEMPOTENCY_KEY_REUSED: 'conflict',
  PAYLOAD_TOO_LARGE: 'payload_too_large',
  UNSUPPORTED_MEDIA_TYPE: 'invalid_request',
  RATE_LIMITED: 'rate_limited',
  INTERNAL_ERROR: 'internal_error',
  NOT_IMPLEMENTED: 'not_implemented',
  SERVICE_UNAVAILABLE: 'service_unavailable',
};

/** The HTTP status of a domain error. */
export const statusOf = (error: AppError): number => STATUS_OF[error.code];
const telemetryCodeOf = (error: AppError): TelemetryErrorCode => error.options.telemetryCode ?? TELEMETRY_CODE_OF[error.code];

interface ValidatorErrorItem {
  path?: string;
  message?: string;
  errorCode?: string;
}

/** express-openapi-validator's HttpError and body-parser's errors carry a numeric status. */
interface StatusError {
  status?: number;
  statusCode?: number;
  type?: string;
  errors?: ValidatorErrorItem[];
  message?: string;
  limit?: number;
  code?: string;
  name?: string;
}

/** `/body/pricingData/flexibleAmount` → `body.pricingData.flexibleAmount`. */
function fieldOf(path: string | undefined): string {
  if (!path) return 'request';
  return path.replace(/^[./]/, '').replace(/\//g, '.');
}

type SchemaNode = {
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  oneOf?: SchemaNode[];
  anyOf?: SchemaNode[];
  not?: SchemaNode;
  else?: SchemaNode;
  required?: string[];
};

/** Field names of `not: {required: [...]}` or `not: {anyOf: [{required: [...]}, …]}`. */
function forbiddenFields(not: SchemaNode | undefined): string[] | undefined {
  if (!not) return undefined;
  if (not.required) return not.required;
  if (not.anyOf?.every((b) => b.required?.length)) return not.anyOf.flatMap((b) => b.required!);
  return undefined;
}

/** The request-body schema node at a validator path such as `/body/pricingData`. */
function bodySchemaAt(operation: unknown, path: string | undefined): SchemaNode | undefined {
  if (!path?.startsWith('/body')) return undefined;
  const op = operation as { requestBody?: { content?: Record<string, { schema?: SchemaNode }> } } | undefined;
  let node = op?.requestBody?.content?.['application/json']?.schema;
  for (const segment of path.split('/').slice(2)) {
    node = /^\d+$/.test(segment) ? node?.items : node?.properties?.[segment];
  }
  return node;
}

/**
 * ajv's words for a failed `oneOf` / `not` ("must match exactly one schema in oneOf") do not
 * say which fields; the contract writes mutual exclusion as `oneOf: [{required:[a]},{required:[b]}]`
 * and `not: {required:[a,b]}`, so the fields can be named.
 */
function explainComposite(item: ValidatorErrorItem, operation: unknown): string | undefined {
  const node = bodySchemaAt(operation, item.path);
  const field = fieldOf(item.path);
  if (item.errorCode?.startsWith('oneOf') && node?.oneOf?.every((branch) => branch.required?.length === 1)) {
    return `${field}: exactly one of ${node.oneOf.map((b) => b.required![0]).join(', ')} must be given`;
  }
  if (item.errorCode?.startsWith('not') && node?.not?.required) {
    return `${field}: ${node.not.required.join(' and ')} are mutually exclusive; give at most one`;
  }
  // if/then/else: fields that only some variants allow (billingInterval only with SUBSCRIPTION).
  const onlyConditional = item.errorCode?.startsWith('not') ? forbiddenFields(node?.else?.not) : undefined;
  if (onlyConditional) return `${field}: ${onlyConditional.join(', ')} ${onlyConditional.length > 1 ? 'are' : 'is'} not allowed here (see the field descriptions for when they apply)`;
  return undefined;
}

/** ajv's wording for a property forbidden by `false` (e.g. billingInterval on a ONE_TIME price). */
const humanize = (message: string | undefined): string =>
  !message ? 'is invalid' : message === 'boolean schema is false' ? 'is not allowed here' : message;

/** The documented spelling of a header parameter (`idempotency-key` → `Idempotency-Key`). */
function headerNameOf(lowercase: string, operation: unknown): string {
  const parameters = (operation as { parameters?: { in?: string; name?: string }[] } | undefined)?.parameters ?? [];
  const declared = parameters.find((p) => p.in === 'header' && p.name?.toLowerCase() === lowercase)?.name;
  return declared ?? lowercase.replace(/(^|-)([a-z])/g, (_, dash: string, letter: string) => dash + letter.toUpperCase());
}

/** A header's own words: "headers.idempotency-key must have required property …" says it badly. */
function describeHeader(item: ValidatorErrorItem, operation: unknown): string | undefined {
  const name = /^[./]headers[./](.+)$/.exec(item.path ?? '')?.[1];
  if (!name) return undefined;
  const header = headerNameOf(name, operation);
  if (item.errorCode?.startsWith('required')) return `the ${header} header is required`;
  return `the ${header} header ${humanize(item.message)}`;
}

/** `required` failures of the branches of a oneOf that explainComposite names as a whole. */
function isExplainedBranch(item: ValidatorErrorItem, explainedOneOfs: Set<string>, operation: unknown): boolean {
  if (!item.errorCode?.startsWith('required') || !item.path) return false;
  const cut = Math.max(item.path.lastIndexOf('/'), item.path.lastIndexOf('.'));
  const parent = item.path.slice(0, cut);
  if (!explainedOneOfs.has(parent)) return false;
  // Only the alternatives themselves: a field the object always requires is still named.
  const alternatives = bodySchemaAt(operation, parent)?.oneOf?.flatMap((branch) => branch.required ?? []) ?? [];
  return alternatives.includes(item.path.slice(cut + 1));
}

/**
 * A `oneOf` of two shapes (a usage event in Kassa's shape or in CloudEvents'): ajv reports the
 * branch the value was not meant for too — "specversion must have required property
 * 'specversion'" beside the real mistake of a Kassa-shaped event, and "must match exactly one
 * schema in oneOf". A branch's own required fields (required there, defined in no other branch)
 * that are missing say only "not this shape": those lines and the oneOf line are left out when
 * another line explains the value. Without another line everything stays.
 */
function shapeNoise(items: ValidatorErrorItem[], operation: unknown): Set<ValidatorErrorItem> {
  const dropped = new Set<ValidatorErrorItem>();
  for (const oneOf of items.filter((i) => i.errorCode?.startsWith('oneOf'))) {
    const at = oneOf.path ?? '';
    const branches = bodySchemaAt(operation, at)?.oneOf;
    if (!branches || branches.length < 2 || !branches.every((b) => b.properties)) continue;
    const own = new Set(branches.flatMap((b, i) => (b.required ?? []).filter((f) => !branches.some((other, j) => j !== i && other.properties?.[f]))));
    const under = items.filter((i) => i !== oneOf && (i.path === at || i.path?.startsWith(`${at}/`) || i.path?.startsWith(`${at}.`)));
    const noise = under.filter((i) => i.errorCode?.startsWith('required') && own.has((i.path ?? '').slice(at.length + 1)));
    if (under.length > noise.length) for (const i of [oneOf, ...noise]) dropped.add(i);
  }
  return dropped;
}

/**
 * The request's fields (body, path, query) come before its headers: a wrong field is what the
 * caller must rethink, a missing Idempotency-Key is one line to add (rule written in openapi/).
 */
function describeValidatorErrors(all: ValidatorErrorItem[], operation: unknown): string {
  const noise = shapeNoise(all, operation);
  const items = all.filter((i) => !noise.has(i));
  const explained = items.map((item) => ({ item, composite: explainComposite(item, operation) }));
  const explainedOneOfs = new Set(explained.filter((e) => e.composite && e.item.errorCode?.startsWith('oneOf')).map((e) => e.item.path ?? ''));
  const fieldLines: string[] = [];
  const headerLines: string[] = [];
  for (const { item, composite } of explained) {
    if (!composite && isExplainedBranch(item, explainedOneOfs, operation)) continue;
    const header = describeHeader(item, operation);
    if (header) headerLines.push(header);
    else fieldLines.push(composite ?? `${fieldOf(item.path)} ${humanize(item.message)}`);
  }
  // ajv reports each failed branch of a oneOf; the distinct lines are what a person needs.
  return [...new Set([...fieldLines, ...headerLines])].join('; ');
}

const DATABASE_OUTAGE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE',
  '57P01', '57P02', '57P03', '08000', '08001', '08003', '08006', '53300',
  // statement_timeout: the database is too slow to answer in time, the caller may retry.
  '57014',
]);

function isDatabaseOutage(err: StatusError): boolean {
  if (err.name === 'KnexTimeoutError') return true;
  if (err.code && DATABASE_OUTAGE_CODES.has(err.code)) return true;
  // `Query read timeout`: pg's client-side query_timeout (a partition: no answer at all).
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout/i.test(
    err.message ?? '',
  );
}

/**
 * Turns anything thrown into an AppError. `internal` tells the caller to log it as a bug.
 * `operation` (the matched OpenAPI operation, when known) lets validation messages name fields.
 */
export function toAppError(thrown: unknown, operation?: unknown): { error: AppError; internal: boolean } {
  if (thrown instanceof AppError) return { error: thrown, internal: statusOf(thrown) >= 500 && thrown.code === 'INTERNAL_ERROR' };
  const err = (thrown ?? {}) as StatusError;
  const status = err.status ?? err.statusCode;

  // body-parser
  if (err.type === 'entity.too.large') {
    return { error: new AppError('PAYLOAD_TOO_LARGE', `Request body exceeds ${err.limit ?? 'the'} bytes`), internal: false };
  }
  if (err.type === 'entity.parse.failed') {
    return { error: validationError('Malformed JSON in request body'), internal: false };
  }
  if (err.type === 'encoding.unsupported' || err.type === 'charset.unsupported') {
    return { error: new AppError('UNSUPPORTED_MEDIA_TYPE', err.message ?? 'Unsupported encoding'), internal: false };
  }
  if (err.type === 'request.aborted') {
    return { error: validationError('Request aborted'), internal: false };
  }

  // express-openapi-validator
  if (Array.isArray(err.errors) && typeof status === 'number') {
    switch (status) {
      case 400:
        return { error: validationError(describeValidatorErrors(err.errors, operation)), internal: false };
      case 401:
        return { error: unauthorized(err.message), internal: false };
      case 404:
        return { error: new AppError('NOT_FOUND', 'Route not found'), internal: false };
      case 405:
        return { error: new AppError('METHOD_NOT_ALLOWED', 'Method not allowed on this path'), internal: false };
      case 413:
        return { error: new AppError('PAYLOAD_TOO_LARGE', 'Request body too large'), internal: false };
      case 415:
        return {
          error: new AppError('UNSUPPORTED_MEDIA_TYPE', 'Request body must be sent as Content-Type: application/json'),
          internal: false,
        };
      default:
        // 500 from the validator is a response that broke the contract: a bug of ours.
        return { error: new AppError('INTERNAL_ERROR', 'Internal server error'), internal: true };
    }
  }

  // The router could not percent-decode a path segment (`%ED%A0%80`, a lone `%`): the client's fault.
  if (thrown instanceof URIError && status === 400) {
    return { error: validationError('Malformed percent-encoding in the request path'), internal: false };
  }

  // Other client errors of the body reader (a corrupt gzip/deflate stream): the client's fault.
  if (status === 400 && (err as { expose?: boolean }).expose) {
    return { error: validationError('Request body could not be decoded'), internal: false };
  }
  if (isDatabaseOutage(err)) return { error: serviceUnavailable(), internal: false };
  // PostgreSQL text cannot hold U+0000 (22P05, or 22021 from a jsonb/text conversion): the input is
  // at fault, and the statement (with its transaction) was rolled back, so nothing was written.
  if (err.code === '22P05' || err.code === '22021' || /unsupported Unicode escape sequence|invalid byte sequence/i.test(err.message ?? '')) {
    return { error: validationError('Text values must not contain the NUL character (\\u0000)'), internal: false };
  }
  return { error: new AppError('INTERNAL_ERROR', 'Internal server error'), internal: true };
}

export function envelopeBody(error: AppError): ErrorEnvelope {
  return { success: false, message: error.message, error: { code: error.code, message: error.message } };
}

export function telemetryBody(error: AppError, requestId: string, now: Date): TelemetryErrorBody {
  return {
    error: { code: telemetryCodeOf(error), message: error.message, details: error.options.details ?? null },
    meta: { request_id: requestId, timestamp: now.toISOString() },
  };
}
