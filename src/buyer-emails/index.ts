/**
 * The buyer e-mails module, wired when SMTP_URL is set (off by default: without it nothing is
 * queued and nothing is sent). Its outbox is written by the commerce unit of work (src/services.ts),
 * its sending job runs on the worker.
 */
import nodemailer from 'nodemailer';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import type { Logger } from '../kernel/logger.js';
import type { MerchantNames } from '../pages/page.js';
import { KnexBuyerEmailRepository } from './buyer-email.repository.js';
import { BuyerEmailService, type MailTransport } from './buyer-email.service.js';

export interface BuyerEmailsModule {
  emails: BuyerEmailService;
  jobs(): Job[];
}

export function createBuyerEmailsModule(deps: {
  db: Db;
  uow: CommerceUnitOfWork;
  smtp: { url: string; from: string };
  merchants: MerchantNames;
  portalUrlOf: (orgId: string) => string;
  clock: Clock;
  logger: Logger;
  /** Tests may pass their own; otherwise nodemailer on SMTP_URL. */
  transport?: MailTransport;
}): BuyerEmailsModule {
  // SMTP_URL carries nodemailer's options too (smtps://user:pass@host:465, smtp://host:587/?requireTLS=true).
  const transport = deps.transport ?? nodemailer.createTransport(deps.smtp.url);
  const emails = new BuyerEmailService(new KnexBuyerEmailRepository(deps.db), deps.uow, transport as MailTransport, deps.smtp.from, deps.merchants, deps.portalUrlOf, deps.clock, deps.logger);
  return {
    emails,
    jobs: () => [{ name: 'buyer-emails', intervalMs: 1000, run: () => emails.sendDue() }],
  };
}
