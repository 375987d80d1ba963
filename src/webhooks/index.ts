/** The webhook domain, wired: its repositories, the signing keys, the services and the delivery worker. */
import type { Config } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { SecretBox } from '../kernel/secrets.js';
import { KnexWebhookDeliveryRepository } from './deliveries.repository.js';
import { DeliveryWorker, type DeliveryWorkerOptions } from './delivery.worker.js';
import { KnexWebhookEndpointRepository } from './endpoints.repository.js';
import { KnexWebhookOutboxRepository } from './outbox.repository.js';
import { KnexSigningKeyRepository } from './signing-key.repository.js';
import { SigningKeyService } from './signing-key.service.js';
import { UrlGuard } from './url-guard.js';
import { WebhookService } from './webhooks.service.js';

export interface Webhooks {
  signingKeys: SigningKeyService;
  /** Endpoint management (merchant API) and the operator's delivery tools (admin API). */
  webhooks: WebhookService;
  /** The delivery job's worker (see webhook.jobs.ts). */
  webhookDelivery: DeliveryWorker;
}

export type WebhooksConfig = Partial<Pick<Config, 'webhookAllowLoopback' | 'webhookLeaseSeconds' | 'webhookBatchSize' | 'webhookPollMs'>>;

export function createWebhooks(deps: {
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  logger: Logger;
  config?: WebhooksConfig;
  /** Counts each delivery attempt's outcome (Prometheus). */
  onAttempt?: DeliveryWorkerOptions['onOutcome'];
}): Webhooks {
  const signingKeys = new SigningKeyService(new KnexSigningKeyRepository(deps.db), deps.secretBox, deps.clock);
  const urlGuard = new UrlGuard({ allowLoopback: deps.config?.webhookAllowLoopback ?? false });
  const deliveries = new KnexWebhookDeliveryRepository(deps.db);
  const repos = { endpoints: new KnexWebhookEndpointRepository(deps.db), outbox: new KnexWebhookOutboxRepository(deps.db), deliveries };
  return {
    signingKeys,
    webhooks: new WebhookService(repos, signingKeys, urlGuard, deps.clock),
    webhookDelivery: new DeliveryWorker(deliveries, signingKeys, urlGuard, deps.clock, deps.logger, {
      leaseMs: deps.config?.webhookLeaseSeconds ? deps.config.webhookLeaseSeconds * 1000 : undefined,
      batchSize: deps.config?.webhookBatchSize,
      idleIntervalMs: deps.config?.webhookPollMs,
      onOutcome: deps.onAttempt,
    }),
  };
}
