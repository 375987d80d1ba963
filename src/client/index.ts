/**
 * The Kassa SDK (`import { createMerchantClient } from 'kassa/client'`): typed clients of the
 * merchant, telemetry and agent wallet APIs, and the webhook verifier. TypeScript sources run
 * with tsx (or any loader that strips types); every client is built on openapi-fetch with the
 * types generated from openapi/*.yaml, so a contract change shows up at compile time.
 */
export { KassaApiError, KassaNetworkError } from './errors.js';
export type { FetchLike, RetryOptions } from './transport.js';
export {
  createMerchantClient,
  type MerchantClient,
  type MerchantClientOptions,
  type CreateSessionOptions,
  type CheckoutSession,
  type CheckoutSessionCreate,
  type Order,
  type OrderList,
  type Product,
  type ProductList,
  type Subscription,
  type SubscriptionList,
  type Customer,
  type CustomerList,
  type WebhookEndpoint,
  type WebhookEndpointCreate,
  type WebhookEndpointUpdate,
  type Entitlements,
  type Me,
  type MerchantSchemas,
  type X402Paywall,
} from './merchant.js';
export {
  createTelemetryClient,
  type TelemetryClient,
  type TelemetryClientOptions,
  type IngestRequest,
  type IngestResponse,
  type TelemetryProject,
  type TelemetrySchemas,
} from './telemetry.js';
export {
  createAgentClient,
  AgentApiError,
  type AgentClient,
  type AgentClientOptions,
  type AgentIdentity,
  type AgentPolicy,
  type AgentHistoryEntry,
  type TypedData,
  type SignTypedDataResult,
  type CreditBalance,
  type PaymentContext,
} from './agent.js';
export {
  createAgentX402Signer,
  recordPaymentContext,
  X402PaymentRefusedError,
  type AgentX402Signer,
  type PaymentTerms,
  type X402TypedDataRequest,
} from './x402.js';
export {
  verifyWebhook,
  verifyX402Receipt,
  WebhookVerifier,
  WebhookVerificationError,
  DEFAULT_TOLERANCE_SECONDS,
  type WebhookEvent,
  type OrderWebhookEvent,
  type RefundWebhookEvent,
  type DisputeWebhookEvent,
  type SubscriptionWebhookEvent,
  type MeterWebhookEvent,
  type MeterThresholdWebhookEvent,
  type TestWebhookEvent,
  type WebhookHeaders,
  type WebhookSigningKey,
  type SigningKeyResponse,
  type VerifyOptions,
  type SignatureOptions,
  type X402Receipt,
  type WebhookVerifierOptions,
  type WebhookVerificationErrorCode,
} from './verify-webhook.js';
