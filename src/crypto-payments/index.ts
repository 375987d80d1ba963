/** The crypto payments module, wired: quotes and receiving wallets, the chain watcher and its job, the admin handlers. */
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { OrgService } from '../orgs/orgs.service.js';
import { createCryptoAdminHandlers } from './admin.handlers.js';
import { createCryptoConsoleHandlers } from './console.handlers.js';
import { ChainWatcher } from './chain-watcher.js';
import type { CryptoConfig } from './crypto-config.js';
import { CryptoQuoteService } from './crypto-quote.service.js';
import { KnexCryptoRepository } from './crypto.repository.js';
import type { SecretBox } from '../kernel/secrets.js';
import { X402FacilitatorService, type X402Chain } from './x402-facilitator.service.js';
import { createX402AdminHandlers, createX402MerchantHandlers } from './x402.handlers.js';
import { KnexX402Repository } from './x402.repository.js';
import { RelayerNonces } from './relayer.js';
import { KnexRelayerNonceRepository } from './relayer.repository.js';
import { X402PaywallService, type PaywallCatalog, type ReceiptSigner } from './x402-paywall.service.js';
import { registerX402Pages } from './x402-pages.js';
import type { Router } from 'express';
import type { ChainConfig } from './crypto-config.js';

/** How often the worker looks for x402 settlements left SUBMITTED (they are stale after two minutes anyway). */
const X402_FINISHER_INTERVAL_MS = 30_000;

export interface CryptoPaymentsModule {
  /** Crypto checkout: quotes, receiving wallets, transfers. */
  cryptoQuotes: CryptoQuoteService;
  /** Watches the chains for transfers to receiving wallets and applies them as payments. */
  chainWatcher: ChainWatcher;
  /** Kassa as an x402 facilitator for the organizations' receiving wallets. */
  x402: X402FacilitatorService;
  /** Catalog prices sold per request at Kassa's own x402 URL. */
  x402Paywalls: X402PaywallService;
  /** The public x402 paywall URLs, `/x402/prices/<id>` (merchant listener). */
  pages(router: Router): void;
  handlers: {
    admin: ReturnType<typeof createCryptoAdminHandlers> & ReturnType<typeof createX402AdminHandlers>;
    merchant: ReturnType<typeof createX402MerchantHandlers>;
    console: ReturnType<typeof createCryptoConsoleHandlers>;
  };
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
  /** Seals the x402 relayer's key. */
  secretBox: SecretBox;
  /** Where Kassa's own x402 paywall resources live (`{base_url}/x402/prices/`). */
  paywallUrlPrefix: string;
  /** The catalog prices x402 sells: paywalls, and prices merchants' routes name. */
  paywallCatalog: PaywallCatalog;
  /** Signs paywall receipts like webhook deliveries. */
  signReceipt: ReceiptSigner;
  /** Tests: the chain access of the x402 facilitator. */
  x402ChainFor?: (chain: ChainConfig) => X402Chain;
  /** Told how many blocks remain unscanned after each pass (Prometheus). */
  observeLag?: (chainId: number, blocks: number) => void;
}): CryptoPaymentsModule {
  const repo = new KnexCryptoRepository(deps.db);
  const cryptoQuotes = new CryptoQuoteService(deps.uow, repo, deps.orgs, deps.config, deps.clock);
  const chainWatcher = new ChainWatcher(repo, deps.payments, deps.config, deps.clock, deps.logger, undefined, deps.observeLag);
  const x402Repo = new KnexX402Repository(deps.db);
  const x402 = new X402FacilitatorService(x402Repo, repo, deps.payments, deps.config, deps.secretBox, deps.clock, deps.logger, {
    ...(deps.x402ChainFor ? { chainFor: deps.x402ChainFor } : {}),
    catalog: deps.paywallCatalog,
    // Every process holding the relayer key takes its nonces from the database (issue 27).
    relayerNonces: new RelayerNonces(new KnexRelayerNonceRepository(deps.db), deps.clock, deps.logger),
  });
  const x402Paywalls = new X402PaywallService(x402Repo, deps.paywallCatalog, repo, deps.config, x402, deps.signReceipt, deps.clock, deps.paywallUrlPrefix);
  return {
    cryptoQuotes,
    chainWatcher,
    x402,
    x402Paywalls,
    pages: (router) => registerX402Pages(router, x402Paywalls, deps.logger),
    handlers: { admin: { ...createCryptoAdminHandlers(cryptoQuotes), ...createX402AdminHandlers(x402) }, merchant: createX402MerchantHandlers(x402, x402Paywalls), console: createCryptoConsoleHandlers(cryptoQuotes, x402Paywalls) },
    jobs: () => [chainWatcher.job(), { name: 'x402-settlement-finisher', intervalMs: X402_FINISHER_INTERVAL_MS, run: async () => (await x402.finishSubmitted()) + (await x402.followSettled()) > 0 }],
  };
}
