/** The customer portal module, wired: its service, the merchant API's session creation, its pages and its housekeeping job. */
import type { Router } from 'express';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { MerchantNames } from '../pages/page.js';
import { checkoutPortalEntry, registerPortalPages } from './portal-pages.js';
import { createPortalHandlers } from './portal.handlers.js';
import { KnexPortalSessionRepository } from './portal.repository.js';
import { PortalService, type PortalAudit, type PortalEntitlements, type PortalSignInMailer, type PortalSubscriptions } from './portal.service.js';

export interface PortalModule {
  portal: PortalService;
  handlers: { merchant: ReturnType<typeof createPortalHandlers> };
  /** The paid checkout page's "open your account". */
  checkoutEntry: ReturnType<typeof checkoutPortalEntry>;
  jobs(): Job[];
  pages(router: Router): void;
}

export function createPortalModule(deps: {
  db: Db;
  uow: CommerceUnitOfWork;
  subscriptions: PortalSubscriptions;
  entitlements: PortalEntitlements;
  merchants: MerchantNames;
  clock: Clock;
  logger: Logger;
  publicBaseUrl: string;
  /** E-mails sign-in links; absent without SMTP_URL (the sign-in page then says to ask the merchant). */
  signInMailer?: () => PortalSignInMailer | undefined;
  /** The audit log of portal changes (the accounts module, composed after this one). */
  audit?: () => PortalAudit | undefined;
}): PortalModule {
  const portal = new PortalService(new KnexPortalSessionRepository(deps.db), deps.uow, deps.subscriptions, deps.entitlements, deps.clock, deps.publicBaseUrl, deps.signInMailer, deps.audit);
  return {
    portal,
    handlers: { merchant: createPortalHandlers(portal) },
    checkoutEntry: checkoutPortalEntry(portal),
    jobs: () => [{ name: 'portal-session-cleanup', intervalMs: 15 * 60_000, run: async () => (await portal.deleteExpired()) > 0 }],
    pages: (router) => registerPortalPages(router, portal, deps.merchants, deps.logger),
  };
}
