/**
 * Sends the buyer e-mails the outbox holds (buyer-email.repository.ts), through the operator's SMTP
 * server (SMTP_URL) from the operator's address (SMTP_FROM) under the organization's display name.
 *
 * Delivery is at least once: a row is marked sent after the SMTP server accepted the message, so a
 * worker that dies between the two repeats that one e-mail — with the same Message-ID
 * (`<EML_…@from-domain>`), which mail systems use to drop the copy. A server that refuses a
 * message for good (5xx) fails it at once; one that is down or answers 4xx is retried after
 * RETRY_DELAYS_MS, then failed. Failed e-mails stay in the table with the server's answer.
 */
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import { renewalOrder } from '../commerce/renewal-order.js';
import { merchantName, pageMerchantOf, type MerchantNames } from '../pages/page.js';
import type { BuyerEmail, BuyerEmailRepository } from './buyer-email.repository.js';
import { renderBuyerEmail, renderInviteEmail, renderSignInEmail, type RenderedEmail } from './buyer-email.render.js';

/** Pauses before attempts 2, 3, …; after the last, the e-mail is failed. */
export const RETRY_DELAYS_MS = [60_000, 5 * 60_000, 30 * 60_000, 2 * 3600_000, 6 * 3600_000];
const LEASE_MS = 120_000;

/** What sends one message (nodemailer's transport in production). */
export interface MailTransport {
  sendMail(message: { from: { name: string; address: string }; to: string; subject: string; text: string; html: string; messageId: string }): Promise<unknown>;
}

export class BuyerEmailService {
  constructor(
    private readonly repo: BuyerEmailRepository,
    private readonly uow: CommerceUnitOfWork,
    private readonly transport: MailTransport,
    private readonly from: string,
    private readonly merchants: MerchantNames,
    private readonly portalUrlOf: (orgId: string) => string,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  private get fromDomain(): string {
    return this.from.split('@').pop() ?? 'kassa.invalid';
  }

  private async send(orgId: string, to: string, messageId: string, rendered: RenderedEmail): Promise<void> {
    const merchant = (await this.merchants.displayNameOf(orgId)) ?? 'Kassa';
    await this.transport.sendMail({ from: { name: merchant, address: this.from }, to, messageId: `<${messageId}@${this.fromDomain}>`, ...rendered });
  }

  private async render(email: BuyerEmail): Promise<RenderedEmail> {
    const stores = this.uow.stores;
    const [order, subscription, merchant] = await Promise.all([
      email.orderId ? stores.orders.find(email.orgId, email.orderId) : undefined,
      email.subscriptionId ? stores.subscriptions.find(email.orgId, email.subscriptionId) : undefined,
      pageMerchantOf(this.merchants, email.orgId),
    ]);
    // A trial's first charge as the renewal at its end prices it (seats × unit, the checkout's
    // coupon, the first order's tax), not the stored amount (no coupon): "€47.60" where €38.08 is charged.
    const firstChargeCents =
      subscription?.trialEnd && subscription.periodNumber === 0 && (email.kind === 'trial_will_end' || email.kind === 'subscription_started')
        ? (await renewalOrder(stores, subscription, 1, false, { processorPaymentId: null, processorStatus: null }, this.clock.now())).amountCents
        : undefined;
    return renderBuyerEmail({
      kind: email.kind,
      merchant: merchantName(merchant) ?? 'the merchant',
      brand: typeof merchant === 'object' ? merchant.brand : undefined,
      order,
      subscription,
      firstChargeCents,
      refundCents: email.amountCents,
      portalUrl: this.portalUrlOf(email.orgId),
    });
  }

  /** One pass of the sending job: claims due e-mails and sends them; true when it sent or retried any. */
  async sendDue(limit = 20): Promise<boolean> {
    const claimed = await this.repo.claimDue(this.clock.now(), LEASE_MS, limit);
    for (const email of claimed) {
      try {
        await this.send(email.orgId, email.to, email.id, await this.render(email));
        await this.repo.markSent(email.id, email.attempts, this.clock.now());
      } catch (err) {
        const { responseCode, code, message } = err as { responseCode?: number; code?: string; message?: string };
        const reason = `${responseCode ?? code ?? 'error'}: ${message ?? String(err)}`;
        const delay = RETRY_DELAYS_MS[email.attempts - 1];
        const permanent = typeof responseCode === 'number' && responseCode >= 500;
        if (permanent || delay === undefined) {
          this.logger.warn({ emailId: email.id, kind: email.kind, reason }, 'buyer e-mail failed');
          await this.repo.markFailed(email.id, email.attempts, reason);
        } else {
          this.logger.info({ emailId: email.id, kind: email.kind, reason, attempt: email.attempts }, 'buyer e-mail not sent; retrying later');
          await this.repo.markRetry(email.id, email.attempts, new Date(this.clock.now().getTime() + delay), reason);
        }
      }
    }
    return claimed.length > 0;
  }

  /**
   * The portal's sign-in link, sent at once (not through the outbox: the link lives 30 minutes and
   * the buyer is waiting; a failure is logged and they ask again). Never rejects; the link is not logged.
   */
  async sendSignInLink(input: { orgId: string; to: string; url: string; expiresAt: Date }): Promise<void> {
    try {
      const merchant = (await this.merchants.displayNameOf(input.orgId)) ?? 'the merchant';
      await this.send(input.orgId, input.to, `signin-${input.expiresAt.getTime()}-${Math.random().toString(36).slice(2)}`, renderSignInEmail({ merchant, url: input.url, expiresAt: input.expiresAt }));
    } catch (err) {
      const { responseCode, code } = err as { responseCode?: number; code?: string };
      this.logger.warn({ orgId: input.orgId, reason: responseCode ?? code ?? 'error' }, 'portal sign-in e-mail not sent');
    }
  }

  /**
   * A console invite's link, sent at once to the invited address (the link is not logged).
   * True when the SMTP server accepted it; a failure is logged and the operator can issue a new link.
   */
  async sendInvite(input: { orgId: string; to: string; url: string; role: string; expiresAt: Date }): Promise<boolean> {
    try {
      const organization = (await this.merchants.displayNameOf(input.orgId)) ?? 'an organization';
      await this.send(input.orgId, input.to, `invite-${input.expiresAt.getTime()}-${Math.random().toString(36).slice(2)}`, renderInviteEmail({ organization, role: input.role, url: input.url, expiresAt: input.expiresAt }));
      return true;
    } catch (err) {
      const { responseCode, code } = err as { responseCode?: number; code?: string };
      this.logger.warn({ orgId: input.orgId, reason: responseCode ?? code ?? 'error' }, 'invite e-mail not sent');
      return false;
    }
  }
}
