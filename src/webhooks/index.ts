/** The webhook module, wired: signing keys, endpoints, the delivery worker, their handlers and jobs. */
import type { Config } from '../config.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { SecretBox } from '../kernel/secrets.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { createWebhookAdminHandlers } from './admin.handlers.js';
import { createWebhookConsoleHandlers } from './console.handlers.js';
import { KnexWebhookDeliveryRepository } from './deliveries.repository.js';
import { DeliveryWorker, type DeliveryWorkerOptions } from './delivery.worker.js';
import { createWebhookEndpointHandlers } from './endpoints.handlers.js';
import { KnexWebhookEndpointRepository } from './endpoints.repository.js';
import { KnexWebhookOutboxRepository } from './outbox.repository.js';
import { createSigningKeyHandlers } from './signing-key.handlers.js';
import { KnexSigningKeyRepository } from './signing-key.repository.js';
import { SigningKeyService } from './signing-key.service.js';
import { UrlGuard } from './url-guard.js';
import { webhookJobs } from './webhook.jobs.js';
import { WebhookService } from './webhooks.service.js';

export interface WebhooksModule {
  signingKeys: SigningKeyService;
  /** Endpoint management (merchant API) and the operator's delivery tools (admin API). */
  webhooks: WebhookService;
  /** The delivery job's worker (see webhook.jobs.ts). */
  webhookDelivery: DeliveryWorker;
  handlers: {
    merchant: ReturnType<typeof createWebhookEndpointHandlers>;
    /** The signing key's public half, served on the platform listener. */
    platform: ReturnType<typeof createSigningKeyHandlers>;
    admin: ReturnType<typeof createWebhookAdminHandlers>;
    /** A member's delivery log, redelivery, test event and signing key (console document). */
    console: ReturnType<typeof createWebhookConsoleHandlers>;
  };
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
}

export type WebhooksConfig = Partial<Pick<Config, 'webhookAllowLoopback' | 'webhookLeaseSeconds' | 'webhookBatchSize' | 'webhookPollMs' | 'webhookRetentionDays'>>;

/** WEBHOOK_RETENTION_DAYS's default (src/config.ts). */
const DEFAULT_RETENTION_DAYS = 30;

export function createWebhooksModule(deps: {
  db: Db;
  clock: Clock;
  secretBox: SecretBox;
  logger: Logger;
  orgs: OrgService;
  config?: WebhooksConfig;
  /** Counts each delivery attempt's outcome (Prometheus). */
  onAttempt?: DeliveryWorkerOptions['onOutcome'];
}): WebhooksModule {
  const signingKeys = new SigningKeyService(new KnexSigningKeyRepository(deps.db), deps.secretBox, deps.clock);
  const urlGuard = new UrlGuard({ allowLoopback: deps.config?.webhookAllowLoopback ?? false });
  const deliveries = new KnexWebhookDeliveryRepository(deps.db);
  const repos = { endpoints: new KnexWebhookEndpointRepository(deps.db), outbox: new KnexWebhookOutboxRepository(deps.db), deliveries };
  const webhooks = new WebhookService(repos, signingKeys, urlGuard, deps.clock);
  const webhookDelivery = new DeliveryWorker(deliveries, signingKeys, urlGuard, deps.clock, deps.logger, {
    leaseMs: deps.config?.webhookLeaseSeconds ? deps.config.webhookLeaseSeconds * 1000 : undefined,
    batchSize: deps.config?.webhookBatchSize,
    idleIntervalMs: deps.config?.webhookPollMs,
    onOutcome: deps.onAttempt,
  });
  const retentionDays = deps.config?.webhookRetentionDays ?? DEFAULT_RETENTION_DAYS;
  return {
    signingKeys,
    webhooks,
    webhookDelivery,
    handlers: {
      merchant: createWebhookEndpointHandlers(webhooks),
      platform: createSigningKeyHandlers(signingKeys),
      admin: createWebhookAdminHandlers({ webhooks, signingKeys, orgs: deps.orgs }),
      console: createWebhookConsoleHandlers({ webhooks, signingKeys }),
    },
    jobs: () => webhookJobs({ delivery: webhookDelivery, webhooks, retentionDays }),
  };
}
