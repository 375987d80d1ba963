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
 *
 * One signing key serves every organization of a Kassa server: a valid signature says Kassa sent
 * it, not that it is for you. Pass `expectedOrganizationId` (your `ORG_…`, `GET /v1/me`) and, when
 * you know it, `expectedEndpointId` (your `WHE_…`): a delivery for anyone else is refused with
 * `wrong_organization` / `wrong_endpoint`. Without them the checks are skipped (as before).
 *
 * x402 paywall receipts are signed with the same key over a separate domain: `verifyX402Receipt`
 * checks them, and `verifyWebhook` refuses them (`not_a_webhook`), and the other way round.
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
/** `meter.credits_exhausted`: `data.customer` and `data.balance`. */
export type MeterWebhookEvent = components['schemas']['MeterWebhookEvent'];
/** `meter.threshold_crossed`: `data.customer`, the subscription, meter, period and the threshold reached. */
export type MeterThresholdWebhookEvent = components['schemas']['MeterThresholdWebhookEvent'];
/** Every envelope Kassa sends; switch on `type`. */
export type WebhookEvent = OrderWebhookEvent | RefundWebhookEvent | DisputeWebhookEvent | SubscriptionWebhookEvent | MeterWebhookEvent | MeterThresholdWebhookEvent | TestWebhookEvent;

export type WebhookSigningKey = components['schemas']['WebhookSigningKey'];
/** The signing-key document, as its envelope or as the envelope's `data`. */
export type SigningKeyResponse = WebhookSigningKey | { success?: boolean; data: WebhookSigningKey };

export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

export interface SignatureOptions {
  /** The receiver's clock (default: now). */
  now?: Date | number;
  /** Largest accepted distance between `webhook-timestamp` and `now`, in seconds (default 300). */
  toleranceSeconds?: number;
}

export interface VerifyOptions extends SignatureOptions {
  /**
   * Your organization (`ORG_…`): a delivery whose `endpoint.orgId` (or `data.order.orgId` /
   * `data.subscription.orgId`) names another one, or none, is refused with `wrong_organization`.
   */
  expectedOrganizationId?: string;
  /** Your endpoint (`WHE_…`): a delivery made to another endpoint is refused with `wrong_endpoint`. */
  expectedEndpointId?: string;
}

export type WebhookVerificationErrorCode =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'unsupported_signature_version'
  | 'invalid_signature'
  | 'invalid_signing_keys'
  | 'invalid_body'
  | 'wrong_organization'
  | 'wrong_endpoint'
  | 'not_a_webhook'
  | 'not_a_receipt';

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
/** x402 paywall receipts: their own label, and a domain before what is signed (src/webhooks/signature.ts). */
const RECEIPT_SIGNATURE_VERSION = 'x402r1';
const RECEIPT_SIGNING_DOMAIN = 'kassa/x402-receipt/v1\n';

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

interface Domain {
  version: string;
  prefix: string;
}
const WEBHOOK_DOMAIN: Domain = { version: SIGNATURE_VERSION, prefix: '' };
const RECEIPT_DOMAIN: Domain = { version: RECEIPT_SIGNATURE_VERSION, prefix: RECEIPT_SIGNING_DOMAIN };

/** The signature check shared by deliveries and receipts; returns the parsed body. */
function verifySigned(rawBody: Uint8Array | string, headers: WebhookHeaders, signingKeyResponse: SigningKeyResponse, options: SignatureOptions, domain: Domain): unknown {
  const body = bodyBytes(rawBody);
  const id = required(headers, 'webhook-id');
  const timestamp = required(headers, 'webhook-timestamp');
  const signatureHeader = required(headers, 'webhook-signature');

  // Printable ASCII only: a header cannot carry a newline, and neither may an id that a caller
  // passes some other way (the receipt domain ends in one, so it can never be smuggled in here).
  if (!/^[\x21-\x7e]{1,256}$/.test(id)) throw new WebhookVerificationError('missing_header', 'webhook-id is not a printable token');
  if (!/^[0-9]{1,15}$/.test(timestamp)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not Unix seconds');
  const nowMs = options.now === undefined ? Date.now() : new Date(options.now).getTime();
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(nowMs / 1000 - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError('timestamp_out_of_tolerance', `webhook-timestamp is more than ${tolerance} s away from now`);
  }

  const keys = publicKeys(signingKeyResponse);
  const message = Buffer.concat([Buffer.from(`${domain.prefix}${id}.${timestamp}.`, 'utf8'), body]);
  let supported = 0;
  const versions = new Set<string>();
  for (const entry of signatureHeader.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma > 0) versions.add(entry.slice(0, comma));
    // Entries of other versions (v1 HMAC, future ones) are ignored, as Standard Webhooks requires.
    if (comma < 0 || entry.slice(0, comma) !== domain.version) continue;
    supported++;
    const signature = Buffer.from(entry.slice(comma + 1), 'base64');
    if (signature.length !== 64) continue;
    for (const key of keys) {
      if (verify(null, message, key, signature)) {
        try {
          return JSON.parse(body.toString('utf8'));
        } catch {
          throw new WebhookVerificationError('invalid_body', 'The signed body is not JSON');
        }
      }
    }
  }
  if (supported === 0) {
    if (domain === WEBHOOK_DOMAIN && versions.has(RECEIPT_SIGNATURE_VERSION)) {
      throw new WebhookVerificationError('not_a_webhook', 'This is an x402 paywall receipt, not a webhook delivery (check receipts with verifyX402Receipt)');
    }
    throw new WebhookVerificationError('unsupported_signature_version', `webhook-signature has no ${domain.version} entry`);
  }
  throw new WebhookVerificationError('invalid_signature', 'No signature matches a published key');
}

/** The organization a delivery names: its endpoint's, else its order's or subscription's. */
function organizationOf(event: unknown): string | undefined {
  const e = event as { endpoint?: { orgId?: unknown }; data?: { order?: { orgId?: unknown }; subscription?: { orgId?: unknown } } } | null;
  const named = [e?.endpoint?.orgId, e?.data?.order?.orgId, e?.data?.subscription?.orgId].filter((v): v is string => typeof v === 'string');
  // Kassa never sends two different ones; a body that does is not for anyone in particular.
  if (new Set(named).size > 1) return undefined;
  return named[0];
}

/** Verifies one delivery and returns its parsed envelope; throws WebhookVerificationError otherwise. */
export function verifyWebhook<E = WebhookEvent>(
  rawBody: Uint8Array | string,
  headers: WebhookHeaders,
  signingKeyResponse: SigningKeyResponse,
  options: VerifyOptions = {},
): E {
  const event = verifySigned(rawBody, headers, signingKeyResponse, options, WEBHOOK_DOMAIN);
  if (options.expectedOrganizationId !== undefined) {
    const orgId = organizationOf(event);
    if (orgId !== options.expectedOrganizationId) {
      throw new WebhookVerificationError(
        'wrong_organization',
        orgId ? `This delivery is for organization ${orgId}, not ${options.expectedOrganizationId}` : `This delivery names no organization; expected ${options.expectedOrganizationId}`,
      );
    }
  }
  if (options.expectedEndpointId !== undefined) {
    const endpointId = (event as { endpoint?: { id?: unknown } } | null)?.endpoint?.id;
    if (endpointId !== options.expectedEndpointId) {
      throw new WebhookVerificationError('wrong_endpoint', `This delivery is for endpoint ${String(endpointId)}, not ${options.expectedEndpointId}`);
    }
  }
  return event as E;
}

/** An x402 paywall receipt (`{"type": "x402.receipt", "data": {orderId, pricingId, productId, …}}`). */
export interface X402Receipt {
  type: 'x402.receipt';
  timestamp: string;
  data: {
    orderId: string;
    pricingId: string;
    productId: string;
    amount: number;
    currency: string;
    network: string;
    asset: string;
    amountUnits: string;
    payer: string;
    payTo: string;
    transaction: string;
    paidAt: string;
  };
}

/**
 * Verifies the signed receipt a Kassa x402 paywall answers a paid request with (its body and its
 * `webhook-*` headers) against the same published keys; a webhook delivery is refused
 * (`unsupported_signature_version`: it carries no `x402r1` entry).
 */
export function verifyX402Receipt<R = X402Receipt>(rawBody: Uint8Array | string, headers: WebhookHeaders, signingKeyResponse: SigningKeyResponse, options: SignatureOptions = {}): R {
  const receipt = verifySigned(rawBody, headers, signingKeyResponse, options, RECEIPT_DOMAIN);
  if ((receipt as { type?: unknown } | null)?.type !== 'x402.receipt') throw new WebhookVerificationError('not_a_receipt', 'The signed body is not an x402 receipt');
  return receipt as R;
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
  /** Refuse deliveries for any other organization (see VerifyOptions). */
  expectedOrganizationId?: string;
  /** Refuse deliveries made to any other endpoint (see VerifyOptions). */
  expectedEndpointId?: string;
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
    const { toleranceSeconds, expectedOrganizationId, expectedEndpointId } = this.options;
    const options: VerifyOptions = { now: this.now(), toleranceSeconds, expectedOrganizationId, expectedEndpointId };
    try {
      return verifyWebhook<E>(rawBody, headers, await this.keys(false), options);
    } catch (err) {
      if (!(err instanceof WebhookVerificationError) || err.code !== 'invalid_signature') throw err;
      return verifyWebhook<E>(rawBody, headers, await this.keys(true), options);
    }
  }
}
