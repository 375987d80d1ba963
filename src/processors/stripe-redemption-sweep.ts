/**
 * Claims whose checkout session was never stored (issue 39; docs/discounts.md "Stripe rail"): on
 * Stripe a coupon's redemption is claimed before Stripe's Checkout Session is opened and the Kassa
 * session is stored after it (checkout-session.service.ts `create`). A process that dies between
 * the two leaves a counted redemption without a session. This sweep, a worker job holding a lease
 * (one worker at a time), gives such claims back once they are older than `delayMs` — longer than
 * any create can take — after asking Stripe whether a Checkout Session for that Kassa session
 * exists (Stripe's list, by creation time, matched on `client_reference_id`):
 * - none, or `expired`: given back;
 * - `open` (made, never handed to anyone): expired in Stripe first, then given back;
 * - `complete` (paid: the orphan path refunds it, `kassa_orphan_refund`): the redemption stays
 *   counted (the buyer was charged the discounted amount) and is not looked at again.
 * Giving back locks the redemption row and re-reads the session (redemption-sweep.repository.ts),
 * so a create that stores its session late and the sweep serialize: one of them wins.
 */
import Stripe from 'stripe';
import type { Clock } from '../kernel/clock.js';
import type { Job } from '../kernel/job.js';
import { randomToken } from '../kernel/ids.js';
import type { Logger } from '../kernel/logger.js';
import type { StripeEventRepository } from './stripe-event.repository.js';
import type { HeldClaim, KnexRedemptionSweepRepository } from './redemption-sweep.repository.js';
import { BACKGROUND, withStripeRetries } from './stripe-retry.js';

const CURSOR = 'redemption-sweep';

/**
 * The delay before a claim without a session is swept: a create's Stripe calls (a tax rate per
 * rate, the coupon, the session) are each at most 3 attempts (stripe-retry.ts INTERACTIVE) of the
 * SDK's 3 tries (`maxNetworkRetries` 2) of STRIPE_TIMEOUT_MS, plus waits of at most 2 s: at the
 * default 10 s timeout about 96 s a call, so a create with two tax rates stays under 7 minutes.
 * 15 minutes, or 90 timeouts when STRIPE_TIMEOUT_MS is larger.
 */
export function redemptionSweepDelayMs(timeoutMs: number): number {
  return Math.max(15 * 60_000, 90 * timeoutMs);
}

/** Claims older than this are not looked at (Stripe's sessions live at most 24 hours; a week covers a worker down for days). */
export const SWEEP_LOOKBACK_MS = 7 * 24 * 3600_000;

export class StripeRedemptionSweep {
  private readonly owner = `sweep_${randomToken(8)}`;

  constructor(
    private readonly stripe: Stripe,
    private readonly repo: KnexRedemptionSweepRepository,
    private readonly cursors: StripeEventRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: { delayMs: number; batch?: number; leaseMs?: number },
  ) {}

  job(): Job {
    return { name: 'stripe-redemption-sweep', intervalMs: 60_000, run: async () => (await this.run()) > 0 };
  }

  /** One pass under the lease; the number of claims given back or kept. */
  async run(): Promise<number> {
    const now = this.clock.now();
    const leaseMs = this.options.leaseMs ?? 5 * 60_000;
    await this.cursors.ensureCursor(CURSOR, 0, now);
    if (!(await this.cursors.leaseCursor(CURSOR, this.owner, now, new Date(now.getTime() + leaseMs)))) return 0;
    try {
      const claims = await this.repo.heldWithoutSession(new Date(now.getTime() - SWEEP_LOOKBACK_MS), new Date(now.getTime() - this.options.delayMs), this.options.batch ?? 50);
      let done = 0;
      for (const claim of claims) {
        if (await this.settle(claim)) done++;
      }
      return done;
    } finally {
      await this.cursors.releaseCursor(CURSOR, this.owner);
    }
  }

  private async settle(claim: HeldClaim): Promise<boolean> {
    const found = await this.stripeSession(claim);
    let status = found?.status ?? null;
    if (found && status === 'open') {
      try {
        status = (await withStripeRetries(() => this.stripe.checkout.sessions.expire(found.id, {}, { idempotencyKey: `kassa_expire_${found.id}` }), BACKGROUND)).status;
      } catch (err) {
        // Completed meanwhile (Stripe refuses to expire it): read again.
        if (!(err instanceof Stripe.errors.StripeInvalidRequestError)) throw err;
        status = (await withStripeRetries(() => this.stripe.checkout.sessions.retrieve(found.id), BACKGROUND)).status;
      }
    }
    const now = this.clock.now();
    if (status === 'complete') {
      await this.repo.keep(claim.id, now);
      this.logger.warn({ checkoutSessionId: claim.checkoutSessionId, stripeSessionId: found!.id }, 'Stripe: a claim without a stored session has a paid Checkout Session (refunded as an orphan); its redemption stays counted');
      return true;
    }
    const released = await this.repo.releaseIfNoSession(claim.checkoutSessionId, now);
    if (released) this.logger.info({ checkoutSessionId: claim.checkoutSessionId, stripeSessionId: found?.id ?? null }, 'A redemption claimed for a checkout session that was never stored was given back');
    return released;
  }

  /** Stripe's Checkout Session for the claim's Kassa session: listed by creation time around the claim, matched on client_reference_id. */
  private async stripeSession(claim: HeldClaim): Promise<Stripe.Checkout.Session | undefined> {
    const from = Math.floor(claim.createdAt.getTime() / 1000) - 60;
    const to = Math.ceil((claim.createdAt.getTime() + this.options.delayMs) / 1000) + 60;
    let startingAfter: string | undefined;
    for (;;) {
      const page = await withStripeRetries(() => this.stripe.checkout.sessions.list({ created: { gte: from, lte: to }, limit: 100, ...(startingAfter && { starting_after: startingAfter }) }), BACKGROUND);
      const match = page.data.find((s) => s.client_reference_id === claim.checkoutSessionId && s.metadata?.kassa_org_id === claim.orgId);
      if (match) return match;
      if (!page.has_more || page.data.length === 0) return undefined;
      startingAfter = page.data[page.data.length - 1]!.id;
    }
  }
}
