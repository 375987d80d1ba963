/**
 * Domain errors: what business code throws when a request breaks a rule. They carry a code from
 * the APIs' closed lists and no HTTP: src/http/errors.ts maps each code to a status and an
 * envelope, once. (A compile-time check there keeps these lists equal to the OpenAPI ones.)
 */

export type ErrorCode =
  | 'VALIDATION_ERROR'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'SECOND_FACTOR_REQUIRED'
  | 'NOT_FOUND'
  | 'METHOD_NOT_ALLOWED'
  | 'CONFLICT'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED_MEDIA_TYPE'
  | 'RATE_LIMITED'
  | 'INTERNAL_ERROR'
  | 'NOT_IMPLEMENTED'
  | 'SERVICE_UNAVAILABLE';

/** The telemetry API's lowercase codes (a more specific one than the default for an ErrorCode). */
export type TelemetryErrorCode =
  | 'invalid_request'
  | 'invalid_trace'
  | 'invalid_metric'
  | 'invalid_interval'
  | 'invalid_aggregation'
  | 'unauthorized'
  | 'not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'payload_too_large'
  | 'quota_exceeded'
  | 'rate_limited'
  | 'internal_error'
  | 'not_implemented'
  | 'service_unavailable';

export type ErrorDetails = Record<string, string | number | boolean | null>;

export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      /** A more specific telemetry code (invalid_trace, quota_exceeded, …). */
      telemetryCode?: TelemetryErrorCode;
      details?: ErrorDetails;
      /** What the client should be told besides the error: Retry-After, rate-limit state. */
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const validationError = (message: string, details?: ErrorDetails) => new AppError('VALIDATION_ERROR', message, { details });
export const unauthorized = (message = 'Missing or invalid API key') => new AppError('UNAUTHORIZED', message);
export const forbidden = (message: string) => new AppError('FORBIDDEN', message);
export const notFound = (what = 'Resource') => new AppError('NOT_FOUND', `${what} not found`);
export const conflict = (message: string) => new AppError('CONFLICT', message);
/** Retry-After on every 503: OTLP exporters and HTTP clients wait that long before retrying. */
export const SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
export const serviceUnavailable = (message = 'Service temporarily unavailable, retry later') =>
  new AppError('SERVICE_UNAVAILABLE', message, { headers: { 'Retry-After': String(SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS) } });
