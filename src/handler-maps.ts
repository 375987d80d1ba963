/**
 * The full operation sets each listener serves. A handler map `satisfies` one of these, so an
 * operation added to a document without a handler (or a handler that drifts from its operation)
 * fails to compile. Composition, not framework: it names each API's caller identity.
 */
import type { operations as MerchantOperations } from '../generated/merchant.js';
import type { operations as TelemetryOperations } from '../generated/telemetry.js';
import type { operations as AgentWalletOperations } from '../generated/agent-wallet.js';
import type { operations as AdminOperations } from '../generated/admin.js';
import type { operations as ConsoleOperations } from '../generated/console.js';
import type { HandlerMap } from './http/typed-handler.js';
import type { TelemetryAuth } from './telemetry/keys.service.js';
import type { MerchantAuth } from './orgs/orgs.service.js';
import type { AgentAuth } from './agent-wallet/runtime.service.js';
import type { SessionAuth } from './accounts/accounts.service.js';

/** Webhook events are documented as operations of the merchant document but sent, not served. */
type WebhookEventOperation = Extract<keyof MerchantOperations, `${string}Event`>;

export type MerchantServedOperations = Omit<MerchantOperations, 'getWebhookSigningKey' | WebhookEventOperation>;
export type MerchantHandlers = HandlerMap<MerchantServedOperations, MerchantAuth>;

/** Telemetry operations run as the key's organization and project. */
export type TelemetryHandlers = HandlerMap<TelemetryOperations, TelemetryAuth>;
export type AgentWalletHandlers = HandlerMap<AgentWalletOperations, AgentAuth>;
export type SigningKeyHandlers = HandlerMap<Pick<MerchantOperations, 'getWebhookSigningKey'>, undefined>;
export type PlatformHandlers = TelemetryHandlers & AgentWalletHandlers & SigningKeyHandlers;

export type AdminHandlers = HandlerMap<AdminOperations, undefined>;

/**
 * The console document (served on the merchant listener): a member's session. The operations
 * that start a session (`security: []`) run without one; their handlers never read `auth`.
 */
export type ConsoleHandlers = HandlerMap<ConsoleOperations, SessionAuth>;
/** The telemetry explorer's console operations, served by the telemetry module (explorer.handlers.ts). */
export type ConsoleExplorerOperation =
  | 'listConsoleTelemetryTraces'
  | 'getConsoleTelemetryTrace'
  | 'listConsoleTelemetrySessions'
  | 'listConsoleTelemetryUsers'
  | 'getConsoleTelemetryMetrics'
  | 'listConsoleTelemetryModelPrices'
  | 'setConsoleTelemetryModelPrice'
  | 'deleteConsoleTelemetryModelPrice';
export type ConsoleExplorerHandlers = Pick<ConsoleHandlers, ConsoleExplorerOperation>;
