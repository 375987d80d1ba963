/**
 * Verifying Kassa webhooks on the receiving side (Standard Webhooks with Ed25519, `v1a`).
 *
 * No official Standard Webhooks library supports `v1a` (asymmetric) signatures yet, so this is
 * ours. It depends on node:crypto only and can be copied into a receiver as a single file.
 *
 *   const event = verifyWebhook(rawBody, req.headers, signingKeyResponse);
 *
 * - `rawBody`: the exact bytes received (a Buffer/Uint8Array, or the raw string) — never a
 *   re-serialized JSON object: any change of whitespace or key order breaks the signature.
 * - `headers`: Node's `req.headers`, a fetch `Headers`, or a plain object (names case-insensitive).
 * - `signingKeyResponse`: the JSON of `GET {api_url}/v1/webhooks/signing-key` (the envelope or its
 *   `data`). Every key of `keys` is tried against every `v1a` entry of `webhook-signature`, so a
 *   delivery made during a key rotation verifies with either key.
 *
 * Throws WebhookVerificationError (check `.code`) and answer such requests with 401.
 * `WebhookVerifier` adds the fetching, 5-minute caching and refresh-on-failure of the key document.
 */
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { components } from '../../generated/merchant.js';

export type OrderWebhookEvent = components['schemas']['OrderWebhookEvent'];
export type SubscriptionWebhookEvent = components['schemas']['SubscriptionWebhookEvent'];
export type TestWebhookEvent = components['schemas']['TestWebhookEvent'];
/** `order.refunded` / `order.refund_failed`: `data.order` and `data.refund`. */
export type RefundWebhookEvent = components['schemas']['RefundWebhookEvent'];
/** `order.dispute_created` / `order.dispute_closed`: `data.order` and `data.dispute`. */
export type DisputeWebhookEvent = components['schemas']['DisputeWebhookEvent'];
/** Every envelope Kassa sends; switch on `type`. */
export type WebhookEvent = OrderWebhookEvent | RefundWebhookEvent | DisputeWebhookEvent | SubscriptionWebhookEvent | TestWebhookEvent;

export type WebhookSigningKey = components['schemas']['WebhookSigningKey'];
/** The signing-key document, as its envelope or as the envelope's `data`. */
export type SigningKeyResponse = WebhookSigningKey | { success?: boolean; data: WebhookSigningKey };

export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** The receiver's clock (default: now). */
  now?: Date | number;
  /** Largest accepted distance between `webhook-timestamp` and `now`, in seconds (default 300). */
  toleranceSeconds?: number;
}

export type WebhookVerificationErrorCode =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'unsupported_signature_version'
  | 'invalid_signature'
  | 'invalid_signing_keys'
  | 'invalid_body';

export class WebhookVerificationError extends Error {
  constructor(
    readonly code: WebhookVerificationErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export const DEFAULT_TOLERANCE_SECONDS = 300;
const SIGNATURE_VERSION = 'v1a';

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  return Array.isArray(value) ? value[0] : value;
}

function required(headers: WebhookHeaders, name: string): string {
  const value = header(headers, name)?.trim();
  if (!value) throw new WebhookVerificationError('missing_header', `Missing ${name} header`);
  return value;
}

const keyCache = new Map<string, KeyObject>();

/** The public keys of a signing-key document (`keys[].x`, and `publicKey` for good measure). */
function publicKeys(response: SigningKeyResponse): KeyObject[] {
  const doc = (response as { data?: WebhookSigningKey }).data ?? (response as WebhookSigningKey);
  const raw: string[] = [];
  for (const jwk of Array.isArray(doc?.keys) ? doc.keys : []) {
    if (jwk && jwk.kty === 'OKP' && jwk.crv === 'Ed25519' && typeof jwk.x === 'string') raw.push(jwk.x);
  }
  if (typeof doc?.publicKey === 'string' && doc.publicKey.startsWith('whpk_')) {
    raw.push(Buffer.from(doc.publicKey.slice(5), 'base64').toString('base64url'));
  }
  const keys: KeyObject[] = [];
  for (const x of new Set(raw)) {
    let key = keyCache.get(x);
    if (!key) {
      try {
        key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
      } catch {
        continue;
      }
      if (keyCache.size > 64) keyCache.clear();
      keyCache.set(x, key);
    }
    keys.push(key);
  }
  if (keys.length === 0) throw new WebhookVerificationError('invalid_signing_keys', 'The signing-key response holds no Ed25519 key');
  return keys;
}

function bodyBytes(rawBody: unknown): Buffer {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  throw new WebhookVerificationError('invalid_body', 'rawBody must be the raw request body (Buffer, Uint8Array or string), not parsed JSON');
}

/** Verifies one delivery and returns its parsed envelope; throws WebhookVerificationError otherwise. */
export function verifyWebhook<E = WebhookEvent>(
  rawBody: Uint8Array | string,
  headers: WebhookHeaders,
  signingKeyResponse: SigningKeyResponse,
  options: VerifyOptions = {},
): E {
  const body = bodyBytes(rawBody);
  const id = required(headers, 'webhook-id');
  const timestamp = required(headers, 'webhook-timestamp');
  const signatureHeader = required(headers, 'webhook-signature');

  if (!/^[0-9]{1,15}$/.test(timestamp)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  const nowMs = options.now === undefined ? Date.now() : new Date(options.now).getTime();
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError('timestamp_out_of_tolerance', `webhook-timestamp is more than ${tolerance} s away from now`);
  }

  const keys = publicKeys(signingKeyResponse);
  const message = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), body]);
  let supported = 0;
  for (const entry of signatureHeader.split(' ')) {
    const comma = entry.indexOf(',');
    // Entries of other versions (v1 HMAC, future ones) are ignored, as Standard Webhooks requires.
    if (comma < 0 || entry.slice(0, comma) !== SIGNATURE_VERSION) continue;
    supported++;
    const signature = Buffer.from(entry.slice(comma + 1), 'base64');
    if (signature.length !== 64) continue;
    for (const key of keys) {
      if (verify(null, message, key, signature)) {
        try {
          return JSON.parse(body.toString('utf8')) as E;
        } catch {
          throw new WebhookVerificationError('invalid_body', 'The signed body is not JSON');
        }
      }
    }
  }
  if (supported === 0) throw new WebhookVerificationError('unsupported_signature_version', `webhook-signature has no ${SIGNATURE_VERSION} entry`);
  throw new WebhookVerificationError('invalid_signature', 'No signature matches a published key');
}

export interface WebhookVerifierOptions {
  /** `{api_url}/v1/webhooks/signing-key`, e.g. https://api.kassa.example/v1/webhooks/signing-key */
  signingKeyUrl: string;
  /** How long a fetched key document is used before refetching (default 5 minutes, the server's max-age). */
  maxAgeMs?: number;
  /** Least time between two refreshes triggered by failed verifications (default 30 s): forged requests cannot make us hammer the key endpoint. */
  minRefreshIntervalMs?: number;
  fetch?: typeof fetch;
  /** Clock for the cache and the timestamp check (default Date.now). */
  now?: () => number;
  toleranceSeconds?: number;
}

/**
 * verifyWebhook with the key document fetched and cached: on a signature failure it refetches the
 * keys once (a rotation may have happened) and verifies again.
 */
export class WebhookVerifier {
  private cached: { doc: SigningKeyResponse; fetchedAt: number } | undefined;
  private lastRefresh = -Infinity;
  private inflight: Promise<SigningKeyResponse> | undefined;

  constructor(private readonly options: WebhookVerifierOptions) {}

  private now(): number {
    return this.options.now ? this.options.now() : Date.now();
  }

  private async keys(force: boolean): Promise<SigningKeyResponse> {
    const now = this.now();
    const fresh = this.cached && now - this.cached.fetchedAt < (this.options.maxAgeMs ?? 300_000);
    if (this.cached && fresh && !force) return this.cached.doc;
    if (force && this.cached && now - this.lastRefresh < (this.options.minRefreshIntervalMs ?? 30_000)) return this.cached.doc;
    this.inflight ??= (async () => {
      try {
        const res = await (this.options.fetch ?? fetch)(this.options.signingKeyUrl, { headers: { accept: 'application/json' } });
        if (!res.ok) throw new Error(`signing-key endpoint answered HTTP ${res.status}`);
        const doc = (await res.json()) as SigningKeyResponse;
        this.cached = { doc, fetchedAt: this.now() };
        this.lastRefresh = this.now();
        return doc;
      } finally {
        this.inflight = undefined;
      }
    })();
    return this.inflight;
  }

  async verify<E = WebhookEvent>(rawBody: Uint8Array | string, headers: WebhookHeaders): Promise<E> {
    const options = { now: this.now(), toleranceSeconds: this.options.toleranceSeconds };
    try {
      return verifyWebhook<E>(rawBody, headers, await this.keys(false), options);
    } catch (err) {
      if (!(err instanceof WebhookVerificationError) || err.code !== 'invalid_signature') throw err;
      return verifyWebhook<E>(rawBody, headers, await this.keys(true), options);
    }
  }
}
