/** The crypto payments module, wired: quotes and receiving wallets, the chain watcher and its job, the admin handlers. */
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { createCryptoAdminHandlers } from './admin.handlers.js';
import { ChainWatcher } from './chain-watcher.js';
import type { CryptoConfig } from './crypto-config.js';
import { CryptoQuoteService } from './crypto-quote.service.js';
import { KnexCryptoRepository } from './crypto.repository.js';

export interface CryptoPaymentsModule {
  /** Crypto checkout: quotes, receiving wallets, transfers. */
  cryptoQuotes: CryptoQuoteService;
  /** Watches the chains for transfers to receiving wallets and applies them as payments. */
  chainWatcher: ChainWatcher;
  handlers: { admin: ReturnType<typeof createCryptoAdminHandlers> };
  /** Background jobs, made afresh for each worker. */
  jobs(): Job[];
}

export function createCryptoPaymentsModule(deps: {
  db: Db;
  uow: CommerceUnitOfWork;
  orgs: OrgService;
  /** Where confirmed transfers are applied. */
  payments: PaymentFlow;
  config: CryptoConfig;
  clock: Clock;
  logger: Logger;
  /** Told how many blocks remain unscanned after each pass (Prometheus). */
  observeLag?: (chainId: number, blocks: number) => void;
}): CryptoPaymentsModule {
  const repo = new KnexCryptoRepository(deps.db);
  const cryptoQuotes = new CryptoQuoteService(deps.uow, repo, deps.orgs, deps.config, deps.clock);
  const chainWatcher = new ChainWatcher(repo, deps.payments, deps.config, deps.clock, deps.logger, undefined, deps.observeLag);
  return {
    cryptoQuotes,
    chainWatcher,
    handlers: { admin: createCryptoAdminHandlers(cryptoQuotes) },
    jobs: () => [chainWatcher.job()],
  };
}
