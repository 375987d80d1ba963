/**
 * One webhook POST over node:https.
 *
 * Why node:https and not fetch: the socket's DNS lookup must be the SSRF guard's (so the address
 * checked is the address connected to), and Node 20's built-in fetch takes no custom lookup
 * without adding undici as a dependency. node:https takes `lookup` per request, never follows
 * redirects (3xx are final by the spec) and lets us stop reading a large response early.
 */
import https from 'node:https';
import tls from 'node:tls';
import type net from 'node:net';
import { performance } from 'node:perf_hooks';

export interface SendOptions {
  timeoutMs: number;
  lookup: net.LookupFunction;
  /** Extra trusted CA certificates (tests: the self-signed receiver); production uses the system store. */
  ca?: string | Buffer;
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

export function postWebhook(url: URL, headers: Record<string, string>, body: Buffer, options: SendOptions): Promise<SendResult> {
  // A duration, not a point in time: monotonic, and unaffected by the injectable Clock on purpose.
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: Omit<SendResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: elapsed() });
    };
    // secureContext reaches tls.connect like every TLS option, though RequestOptions does not list it.
    const requestOptions: https.RequestOptions & Pick<tls.ConnectionOptions, 'secureContext'> = {
      method: 'POST',
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': String(body.length),
        'user-agent': USER_AGENT,
      },
      lookup: options.lookup,
      // Building a TLS context (the whole CA store) per attempt costs more than the handshake.
      secureContext: secureContextFor(options.ca),
      agent: false,
      // autoSelectFamily is on by default in Node 20; our lookup answers both forms.
    };
    const req = https.request(url, requestOptions);
    // The whole attempt (DNS, connect, TLS, request, response head and the body we read) shares one budget.
    const timer = setTimeout(() => {
      req.destroy(new Error(`timed out after ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    req.on('error', (err) => {
      finish({ statusCode: null, retryAfter: undefined, responseBody: null, error: describe(err) });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      const done = () =>
        finish({
          statusCode: res.statusCode ?? null,
          retryAfter: headerValue(res.headers['retry-after']),
          responseBody: decodeTruncated(Buffer.concat(chunks)),
          error: null,
        });
      res.on('data', (chunk: Buffer) => {
        if (kept >= options.maxResponseBytes) return;
        chunks.push(chunk.subarray(0, options.maxResponseBytes - kept));
        kept += Math.min(chunk.length, options.maxResponseBytes - kept);
        if (kept >= options.maxResponseBytes) {
          // The status is known and we keep no more: no reason to wait for the rest.
          done();
          res.destroy();
        }
      });
      res.on('end', done);
      res.on('error', () => done());
      res.on('close', done);
    });
    req.end(body);
  });
}

const contexts = new Map<string | Buffer | undefined, tls.SecureContext>();

/** One TLS client context per trusted-CA setting: the system store (plus NODE_EXTRA_CA_CERTS), or `ca` alone (as the `ca` option of a request would). */
function secureContextFor(ca: string | Buffer | undefined): tls.SecureContext {
  let context = contexts.get(ca);
  if (!context) {
    context = tls.createSecureContext(ca === undefined ? {} : { ca });
    contexts.set(ca, context);
  }
  return context;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** UTF-8, without a character cut in half at the truncation point. */
function decodeTruncated(bytes: Buffer): string | null {
  if (bytes.length === 0) return null;
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes).replace(/\uFFFD$/, '');
}

function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (err.name === 'UnsafeUrlError') return `refused: ${err.message}`;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}
