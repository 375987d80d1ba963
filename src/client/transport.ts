/**
 * The fetch the clients hand to openapi-fetch: a per-attempt timeout, and bounded retries with
 * exponential backoff for requests that are safe to repeat — GET/HEAD, and any request carrying
 * an `Idempotency-Key` (the server answers a repeat with the original result). Each attempt
 * resends the same method, URL, headers and bytes, so a creation retried after a timeout reuses
 * its key and cannot create twice.
 */
import { KassaNetworkError } from './errors.js';

export type FetchLike = (request: Request) => Promise<Response>;

export interface RetryOptions {
  /** Custom fetch (tests, proxies, instrumentation). Default: the global fetch. */
  fetch?: FetchLike;
  /** Time allowed to one attempt, answer body included (ms). Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt (0 disables). Default 2, so at most 3 attempts. */
  retries?: number;
  /** First backoff delay (ms); doubled per retry, ±50 % jitter. Default 300. */
  retryDelayMs?: number;
  /** Longest wait between attempts, `Retry-After` included (ms). Default 10 000. */
  maxRetryDelayMs?: number;
}

/** Statuses that mean "not processed, try again": the server asks for it. */
const RETRY_STATUSES = new Set([429, 503]);

const sleep = (ms: number, signal?: AbortSignal | null) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after');
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

export function retryingFetch(options: RetryOptions = {}): FetchLike {
  const fetchImpl: FetchLike = options.fetch ?? ((request) => fetch(request));
  const timeoutMs = options.timeoutMs ?? 30_000;
  const retries = Math.max(0, Math.floor(options.retries ?? 2));
  const baseDelay = options.retryDelayMs ?? 300;
  const maxDelay = options.maxRetryDelayMs ?? 10_000;

  return async (request: Request): Promise<Response> => {
    const repeatable = request.method === 'GET' || request.method === 'HEAD' || request.headers.has('idempotency-key');
    const attempts = repeatable ? retries + 1 : 1;
    // Read once: a Request body is a stream and cannot be sent twice.
    const body = request.body === null ? undefined : await request.arrayBuffer();
    const callerSignal = request.signal;

    let lastError: unknown;
    let timedOut = false;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = AbortSignal.any([timeout, callerSignal]);
      try {
        const response = await fetchImpl(
          new Request(request.url, { method: request.method, headers: request.headers, body, signal, redirect: request.redirect }),
        );
        // Buffered inside the attempt, so a body cut by the timeout is retried like any timeout.
        const buffered = new Response(response.status === 204 || response.status === 304 ? null : await response.arrayBuffer(), {
          status: response.status,
          statusText: response.statusText,
          headers: response.headers,
        });
        if (attempt === attempts || !RETRY_STATUSES.has(buffered.status)) return buffered;
        const wait = Math.max(backoff(attempt, baseDelay, maxDelay), retryAfterMs(buffered) ?? 0);
        // The server asks for a longer wait than we allow: hand its answer to the caller.
        if (wait > maxDelay) return buffered;
        await sleep(wait, callerSignal);
      } catch (err) {
        if (callerSignal.aborted) throw err;
        timedOut = timeout.aborted;
        lastError = err;
        if (attempt === attempts) break;
        await sleep(backoff(attempt, baseDelay, maxDelay), callerSignal);
      }
    }
    const reason = timedOut ? `no answer within ${timeoutMs} ms` : `network error: ${(lastError as Error)?.message ?? String(lastError)}`;
    throw new KassaNetworkError(`${request.method} ${new URL(request.url).pathname}: ${reason} (${attempts} attempt${attempts > 1 ? 's' : ''})`, timedOut, attempts, {
      cause: lastError,
    });
  };
}

function backoff(attempt: number, base: number, max: number): number {
  return Math.min(max, Math.round(base * 2 ** (attempt - 1) * (0.5 + Math.random())));
}
