/**
 * One webhook POST over node:https, on a keep-alive connection of the route `connections.ts`
 * checked.
 *
 * Why node:https and not fetch: the socket's DNS lookup must be pinned to the addresses the SSRF
 * guard checked, and Node 20's built-in fetch takes no custom lookup without adding undici as a
 * dependency. node:https takes `lookup` per agent, never follows redirects (3xx are final by the
 * spec) and lets us stop reading a large response early.
 */
import https from 'node:https';
import type tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { urlToHttpOptions } from 'node:url';
import type { Connection } from './connections.js';

export interface SendOptions {
  timeoutMs: number;
  /** The checked route: its keep-alive agent, and what a one-off connection to it needs. */
  connection: Connection;
  /** Bytes of the response body kept for the attempt record. */
  maxResponseBytes: number;
}

export interface SendResult {
  /** null when no HTTP response arrived. */
  statusCode: number | null;
  retryAfter: string | undefined;
  responseBody: string | null;
  error: string | null;
  durationMs: number;
}

const USER_AGENT = 'Kassa-Webhooks/1.0 (+https://www.standardwebhooks.com/)';

/** Errors of a pooled socket the receiver closed while we were starting to use it. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** A receiver URL as request options, converted once per URL rather than by node:https on every request. */
export interface RequestTarget {
  url: URL;
  options: Readonly<https.RequestOptions>;
}

export function requestTarget(url: URL): RequestTarget {
  return { url, options: Object.freeze(urlToHttpOptions(url)) };
}

export function postWebhook(target: RequestTarget, headers: Record<string, string>, body: Buffer, options: SendOptions): Promise<SendResult> {
  // A duration, not a point in time: monotonic, and unaffected by the injectable Clock on purpose.
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const requestHeaders = {
    ...headers,
    'content-type': 'application/json',
    'content-length': String(body.length),
    'user-agent': USER_AGENT,
  };
  return new Promise((resolve) => {
    let settled = false;
    let timedOut = false;
    let req: ReturnType<typeof https.request>;
    const finish = (result: Omit<SendResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };
    // The whole attempt (waiting for a socket, DNS, connect, TLS, request, response head and the
    // body we read, a second connection included) shares one budget.
    const timer = setTimeout(() => {
      timedOut = true;
      req.destroy(new Error(`timed out after ${options.timeoutMs} ms`));
    }, options.timeoutMs);

    const send = (pooled: boolean) => {
      const { agent, lookup, secureContext } = options.connection;
      // A one-off connection has the pooled one's pinned lookup and TLS context (secureContext
      // reaches tls.connect like every TLS option, though RequestOptions does not list it).
      const connect: https.RequestOptions & Pick<tls.ConnectionOptions, 'secureContext'> = pooled ? { agent } : { agent: false, lookup, secureContext };
      const request = https.request({ ...target.options, method: 'POST', headers: requestHeaders, ...connect });
      req = request;
      let responded = false;
      request.on('error', (err) => {
        // A keep-alive socket the receiver closed just as we reused it: the request never got an
        // answer, and probably never arrived. Send it once more on a new connection, within the
        // same attempt and time budget (Node's documented pattern, `req.reusedSocket`). The
        // receiver may see it twice if it did arrive: delivery is at least once anyway.
        if (pooled && request.reusedSocket && !responded && !timedOut && !settled && STALE_SOCKET_CODES.has((err as NodeJS.ErrnoException).code ?? '')) {
          send(false);
          return;
        }
        finish({ statusCode: null, retryAfter: undefined, responseBody: null, error: describe(err) });
      });
      request.on('response', (res) => {
        responded = true;
        const chunks: Buffer[] = [];
        let kept = 0;
        const done = () =>
          finish({
            statusCode: res.statusCode ?? null,
            retryAfter: headerValue(res.headers['retry-after']),
            responseBody: chunks.length === 0 ? null : decodeTruncated(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)),
            error: null,
          });
        // Read to the end (so a keep-alive socket goes back to the pool) unless the body is longer than we keep.
        res.on('data', (chunk: Buffer) => {
          if (kept >= options.maxResponseBytes) return;
          chunks.push(chunk.subarray(0, options.maxResponseBytes - kept));
          kept += Math.min(chunk.length, options.maxResponseBytes - kept);
          if (kept >= options.maxResponseBytes) {
            // The status is known and we keep no more: no reason to wait for the rest (the socket is closed, not pooled).
            done();
            res.destroy();
          }
        });
        res.on('end', done);
        res.on('error', () => done());
        res.on('close', done);
      });
      request.end(body);
    };
    send(true);
  });
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

/**
 * UTF-8, without a character cut in half at the truncation point. NUL characters become U+FFFD:
 * PostgreSQL text cannot hold them, and one receiver's odd body must not fail the statement that
 * records a whole batch of attempts.
 */
function decodeTruncated(bytes: Buffer): string | null {
  if (bytes.length === 0) return null;
  return utf8.decode(bytes).replace(/\uFFFD$/, '').replace(/\u0000/g, '\uFFFD');
}

function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (err.name === 'UnsafeUrlError') return `refused: ${err.message}`;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}
