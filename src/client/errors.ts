/**
 * Errors thrown by the Kassa clients. An answer of the API becomes a KassaApiError carrying the
 * machine-readable `code` to switch on (the envelope's `error.code`, e.g. `IDEMPOTENCY_KEY_REUSED`,
 * or the telemetry API's lowercase `error.code`, e.g. `invalid_trace`); a request that got no
 * answer at all (network failure or timeout, after the client's own retries) is a
 * KassaNetworkError.
 */

export class KassaApiError extends Error {
  constructor(
    /** HTTP status of the answer. */
    readonly status: number,
    /** `error.code` of the body; `UNKNOWN` when the body was not a Kassa error (a proxy's page). */
    readonly code: string,
    message: string,
    /** The `X-Request-Id` of the answer (quote it when asking for support). */
    readonly requestId: string | undefined,
    /** The telemetry API's `error.details` (which field, which trace); null elsewhere. */
    readonly details: Record<string, unknown> | null = null,
    /** The parsed body as received. */
    readonly body: unknown = undefined,
  ) {
    super(message);
    this.name = 'KassaApiError';
  }
}

export class KassaNetworkError extends Error {
  constructor(
    message: string,
    /** True when the last attempt was cut by the client's `timeoutMs`. */
    readonly timedOut: boolean,
    /** Attempts made, retries included. */
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KassaNetworkError';
  }
}

type ErrorBody = {
  message?: unknown;
  error?: { code?: unknown; message?: unknown; details?: unknown };
  meta?: { request_id?: unknown };
};

/** Builds the error of a non-2xx answer from its (already parsed, possibly absent) body. */
export function apiErrorFrom(response: Response, body: unknown): KassaApiError {
  const parsed = (body && typeof body === 'object' ? body : {}) as ErrorBody;
  const code = typeof parsed.error?.code === 'string' ? parsed.error.code : 'UNKNOWN';
  const message =
    typeof parsed.error?.message === 'string'
      ? parsed.error.message
      : typeof parsed.message === 'string'
        ? parsed.message
        : `HTTP ${response.status} ${response.statusText}`.trim();
  const requestId =
    response.headers.get('x-request-id') ?? (typeof parsed.meta?.request_id === 'string' ? parsed.meta.request_id : undefined);
  const details =
    parsed.error?.details && typeof parsed.error.details === 'object' ? (parsed.error.details as Record<string, unknown>) : null;
  return new KassaApiError(response.status, code, message, requestId, details, body);
}
