/**
 * Typed client of the merchant API (openapi/merchant.yaml), for a merchant's server.
 *
 *   const kassa = createMerchantClient({ baseUrl: 'https://pay.example.com', apiKey: process.env.KASSA_API_KEY! });
 *   const session = await kassa.createCheckoutSession({ pricingId: 'PRC_…', customerEmail: 'ada@example.com' });
 *   // redirect the buyer to session.url; fulfil on the order.paid webhook
 *
 * Creation is idempotent: `createCheckoutSession` sends an `Idempotency-Key` (a random UUID unless
 * you pass one) and the client's own retries — after a timeout, a network error, `503` or `429` —
 * resend the same key and bytes, so one call never creates two sessions. Pass your own key (say,
 * `order-10042`) to make retries across process restarts safe too. Reads are retried the same way;
 * other writes are sent once.
 *
 * Every method returns the envelope's `data`; an error answer throws KassaApiError (`status`,
 * `code`, `message`, `requestId`), no answer at all throws KassaNetworkError. `http` is the
 * underlying openapi-fetch client for anything not wrapped here.
 */
import { randomUUID } from 'node:crypto';
import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths } from '../../generated/merchant.js';
import { apiErrorFrom } from './errors.js';
import { retryingFetch, type RetryOptions } from './transport.js';

type Schemas = components['schemas'];
type JsonBody<K extends keyof operations> = operations[K] extends { requestBody: { content: { 'application/json': infer B } } }
  ? B
  : never;
type Query<K extends keyof operations> = operations[K]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never;
type Ok<K extends keyof operations> = operations[K]['responses'] extends Record<200, { content: { 'application/json': { data: infer D } } }>
  ? D
  : operations[K]['responses'] extends Record<201, { content: { 'application/json': { data: infer D } } }>
    ? D
    : never;

export type CheckoutSessionCreate = JsonBody<'createCheckoutSession'>;
export type CheckoutSession = Ok<'getCheckoutSession'>;
export type Order = Ok<'getOrder'>;
export type X402Paywall = Ok<'putX402Paywall'>;
export type OrderList = Ok<'listOrders'>;
export type Product = Ok<'getProduct'>;
export type ProductList = Ok<'listProducts'>;
export type Subscription = Ok<'getSubscription'>;
export type SubscriptionList = Ok<'listSubscriptions'>;
export type Customer = Ok<'getCustomer'>;
export type CustomerList = Ok<'listCustomers'>;
export type WebhookEndpoint = Ok<'getWebhookEndpoint'>;
export type WebhookEndpointCreate = JsonBody<'createWebhookEndpoint'>;
export type WebhookEndpointUpdate = JsonBody<'updateWebhookEndpoint'>;
export type Entitlements = Ok<'checkEntitlement'>;
export type Me = Ok<'getMe'>;
export type CommerceMetrics = Ok<'getCommerceMetrics'>;
export type { Schemas as MerchantSchemas };

export interface MerchantClientOptions extends RetryOptions {
  /** The merchant API's origin (`{base_url}`), e.g. `http://localhost:3000`; no trailing slash needed. */
  baseUrl: string;
  /** A merchant API key (`X-API-Key`). Keep it on your server. */
  apiKey: string;
}

export interface CreateSessionOptions {
  /** Your key for this creation (1-255 printable ASCII characters). Default: a random UUID. */
  idempotencyKey?: string;
}

export interface MerchantClient {
  readonly http: Client<paths>;
  /** Creates a session (or returns the one already created under the same `Idempotency-Key`). */
  createCheckoutSession(body: CheckoutSessionCreate, options?: CreateSessionOptions): Promise<CheckoutSession>;
  getCheckoutSession(id: string): Promise<CheckoutSession>;
  expireCheckoutSession(id: string): Promise<CheckoutSession>;
  getOrder(id: string): Promise<Order>;
  listOrders(query?: Query<'listOrders'>): Promise<OrderList>;
  getProduct(id: string): Promise<Product>;
  listProducts(query?: Query<'listProducts'>): Promise<ProductList>;
  getSubscription(id: string): Promise<Subscription>;
  listSubscriptions(query?: Query<'listSubscriptions'>): Promise<SubscriptionList>;
  getCustomer(id: string): Promise<Customer>;
  listCustomers(query?: Query<'listCustomers'>): Promise<CustomerList>;
  listWebhookEndpoints(query?: Query<'listWebhookEndpoints'>): Promise<Ok<'listWebhookEndpoints'>>;
  createWebhookEndpoint(body: WebhookEndpointCreate): Promise<WebhookEndpoint>;
  getWebhookEndpoint(id: string): Promise<WebhookEndpoint>;
  updateWebhookEndpoint(id: string, body: WebhookEndpointUpdate): Promise<WebhookEndpoint>;
  deleteWebhookEndpoint(id: string): Promise<Ok<'deleteWebhookEndpoint'>>;
  checkEntitlement(query: Query<'checkEntitlement'>): Promise<Entitlements>;
  /** Volume, payments, subscriptions and conversion per currency and local-date bucket. */
  getCommerceMetrics(query: Query<'getCommerceMetrics'>): Promise<CommerceMetrics>;
  /** Sells a one-time catalog price per request at Kassa's own x402 URL (the answer's `url`); again: changes `contentUrl`. */
  putX402Paywall(pricingId: string, body?: JsonBody<'putX402Paywall'>): Promise<X402Paywall>;
  /** Turns a price's x402 paywall off. */
  deleteX402Paywall(pricingId: string): Promise<X402Paywall>;
  me(): Promise<Me>;
}

type FetchResult = { data?: unknown; error?: unknown; response: Response };

/** The envelope's `data` of a 2xx answer; anything else becomes a KassaApiError. */
export async function unwrapEnvelope<T>(request: Promise<FetchResult>): Promise<T> {
  const { data, error, response } = await request;
  if (!response.ok) throw apiErrorFrom(response, error);
  return (data as { data: T }).data;
}

export function createMerchantClient(options: MerchantClientOptions): MerchantClient {
  if (!options.apiKey) throw new Error('createMerchantClient: apiKey is required');
  const http = createClient<paths>({
    baseUrl: options.baseUrl.replace(/\/+$/, ''),
    fetch: retryingFetch(options),
    headers: { 'X-API-Key': options.apiKey, Accept: 'application/json' },
  });
  const id = (value: string) => ({ params: { path: { id: value } } });
  const query = <Q>(value: Q | undefined) => ({ params: { query: value ?? {} } }) as never;

  return {
    http,
    createCheckoutSession: (body, opts = {}) =>
      unwrapEnvelope(
        http.POST('/v1/checkout-sessions', {
          body,
          params: { header: { 'Idempotency-Key': opts.idempotencyKey ?? randomUUID() } },
        }),
      ),
    getCheckoutSession: (sessionId) => unwrapEnvelope(http.GET('/v1/checkout-sessions/{id}', id(sessionId))),
    expireCheckoutSession: (sessionId) => unwrapEnvelope(http.POST('/v1/checkout-sessions/{id}/expire', id(sessionId))),
    getOrder: (orderId) => unwrapEnvelope(http.GET('/v1/orders/{id}', id(orderId))),
    listOrders: (q) => unwrapEnvelope(http.GET('/v1/orders', query(q))),
    getProduct: (productId) => unwrapEnvelope(http.GET('/v1/product/{id}', id(productId))),
    listProducts: (q) => unwrapEnvelope(http.GET('/v1/product', query(q))),
    getSubscription: (subscriptionId) => unwrapEnvelope(http.GET('/v1/subscriptions/{id}', id(subscriptionId))),
    listSubscriptions: (q) => unwrapEnvelope(http.GET('/v1/subscriptions', query(q))),
    getCustomer: (customerId) => unwrapEnvelope(http.GET('/v1/customers/{id}', id(customerId))),
    listCustomers: (q) => unwrapEnvelope(http.GET('/v1/customers', query(q))),
    listWebhookEndpoints: (q) => unwrapEnvelope(http.GET('/v1/webhook', query(q))),
    createWebhookEndpoint: (body) => unwrapEnvelope(http.POST('/v1/webhook', { body })),
    getWebhookEndpoint: (endpointId) => unwrapEnvelope(http.GET('/v1/webhook/{id}', id(endpointId))),
    updateWebhookEndpoint: (endpointId, body) => unwrapEnvelope(http.PATCH('/v1/webhook/{id}', { ...id(endpointId), body })),
    deleteWebhookEndpoint: (endpointId) => unwrapEnvelope(http.DELETE('/v1/webhook/{id}', id(endpointId))),
    checkEntitlement: (q) => unwrapEnvelope(http.GET('/v1/entitlements/check', query(q))),
    getCommerceMetrics: (q) => unwrapEnvelope(http.GET('/v1/metrics/commerce', query(q))),
    putX402Paywall: (pricingId, body = {}) => unwrapEnvelope(http.PUT('/v1/x402/paywalls/{id}', { ...id(pricingId), body })),
    deleteX402Paywall: (pricingId) => unwrapEnvelope(http.DELETE('/v1/x402/paywalls/{id}', id(pricingId))),
    me: () => unwrapEnvelope(http.GET('/v1/me')),
  };
}
