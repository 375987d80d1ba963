/**
 * The Stripe card processor (docs/card-processors.md): a Kassa card session opens a Stripe
 * Checkout Session, Stripe's page takes the card, and Stripe's events come back through
 * StripeEventService, which applies them with the same PaymentFlow as the sandbox.
 */
import Stripe from 'stripe';
import type { CardProcessorConfig } from '../config.js';
import type { CheckoutSession, RefundStatus } from '../commerce/model.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { RefundFlow } from '../commerce/refund-flow.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { Clock } from '../kernel/clock.js';
import { AppError, conflict, forbidden, serviceUnavailable, validationError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import type { CardRefunds, HostedCardCheckout } from './card-processor.js';
import type { StripeEventRepository } from './stripe-event.repository.js';
import { destinationTransfer, isDestinationRefusal } from './stripe-connect.js';
import { stripeRecurring, type StripeSubscriptionEvents } from './stripe-subscription-events.js';
import { KASSA_ORG_KEY, KASSA_SESSION_KEY, type StripeEventOutcome } from './stripe-metadata.js';
import { StripePaymentEvents } from './stripe-payment-events.js';
import { INTERACTIVE, retryAfterMs, withStripeRetries } from './stripe-retry.js';
import { verifiedStripeEvent } from './stripe-event-intake.js';
import { refundStatus } from './stripe-refund-status.js';
import { stripeCouponFor } from './stripe-coupons.js';
import { priceWithTax, type TaxContext, type TaxRateSnapshot } from '../commerce/tax.js';
import { sessionLineInputs } from '../commerce/order-lines.js';

export type StripeConfig = Extract<CardProcessorConfig, { kind: 'stripe' }>;

/** The SDK client: its own retries (with the same idempotency key) on network errors, 409, 429 and 5xx. */
export function createStripeClient(config: StripeConfig): Stripe {
  const base = config.apiBaseUrl ? new URL(config.apiBaseUrl) : undefined;
  return new Stripe(config.secretKey, {
    maxNetworkRetries: 2,
    timeout: config.timeoutMs,
    appInfo: { name: 'Kassa' },
    ...(base && {
      host: base.hostname,
      port: base.port ? Number(base.port) : base.protocol === 'http:' ? 80 : 443,
      protocol: base.protocol === 'http:' ? 'http' : 'https',
    }),
  });
}

export { KASSA_ORG_KEY, KASSA_SESSION_KEY, type StripeEventOutcome } from './stripe-metadata.js';

/** Stripe refuses a Checkout Session whose `expires_at` is less than 30 minutes after Stripe creates it. */
export const STRIPE_MIN_EXPIRY_SECONDS = 1800;
/**
 * How much later than Kassa's clock read it Stripe may create the session: the create's latency,
 * the SDK's retries of a request that never reached Stripe, and a little clock skew.
 */
export const STRIPE_EXPIRY_HEADROOM_SECONDS = 60;

/**
 * The Checkout Session's `expires_at` (seconds): the Kassa session's expiry, but never less than
 * Stripe's 30-minute minimum plus the headroom from now, so a session asked for the documented
 * minimum (`expiresIn` 1800) is not refused when the create reaches Stripe a little later. Kassa's
 * session then expires at the same moment (see StripeCheckout.open).
 */
export function stripeExpiresAt(kassaExpiresAt: Date, now: Date): number {
  return Math.max(Math.ceil(kassaExpiresAt.getTime() / 1000), Math.ceil(now.getTime() / 1000) + STRIPE_MIN_EXPIRY_SECONDS + STRIPE_EXPIRY_HEADROOM_SECONDS);
}

/** A Kassa tax rate as the Stripe rail reads it. */
export interface StripeRailTaxRate {
  id: string;
  displayName: string;
  percentage: string;
  inclusive: boolean;
  country: string;
  region: string | null;
  description: string | null;
  stripeTaxRateId: string | null;
}

/** Kassa's tax rates as the Stripe rail needs them (src/tax/tax.service.ts): the Stripe tax rate of each, made once. */
export interface StripeTaxRates {
  stripeTaxRate(orgId: string, rateId: string, make: (rate: StripeRailTaxRate) => Promise<string>): Promise<string>;
  /** One rate (archived ones too); 404 AppError when the organization has none of that id. */
  get(orgId: string, id: string): Promise<StripeRailTaxRate>;
}

/**
 * Metadata of a Checkout Session an earlier release sent with Stripe's `dynamic_tax_rates` (Stripe
 * chose the rate from the buyer's address): its tax is read back when it completes. Kassa no
 * longer sends them (docs/tax.md); the read-back stays for sessions opened before the upgrade.
 */
export const KASSA_DYNAMIC_TAX_KEY = 'kassa_dynamic_tax';

export class StripeCheckout implements HostedCardCheckout {
  constructor(
    private readonly stripe: Stripe,
    /** Kassa's public base URL: Stripe sends the buyer back to Kassa's own pages. */
    private readonly publicBaseUrl: string,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Tax rates (issue 39); absent → sessions are sent without tax rates. */
    private readonly taxRates?: StripeTaxRates,
  ) {}

  /**
   * The Stripe tax rates (`txr_…`) of a session's Kassa rates (issue 39): each Kassa rate gets one
   * Stripe tax rate, created once (idempotency key `kassa_tax_rate_{rate}`) and remembered on the
   * rate. Stripe's `percentage` is the same decimal, `inclusive` the same flag, `country`/`state`
   * the rate's country and region. Reverse charge sends none (nothing is charged).
   */
  private async stripeTaxRateIds(session: CheckoutSession): Promise<string[]> {
    const tax = session.tax;
    if (!tax || tax.reverseCharge || tax.rates.length === 0 || !this.taxRates) return [];
    return this.stripeTaxRatesOf(session, tax.rates.map((r) => r.rateId));
  }

  private async stripeTaxRatesOf(session: CheckoutSession, rateIds: readonly string[]): Promise<string[]> {
    if (!this.taxRates) return [];
    const ids: string[] = [];
    for (const rateId of rateIds) {
      ids.push(
        await this.taxRates.stripeTaxRate(session.orgId, rateId, async (rate) => {
          try {
            const created = await withStripeRetries(
              () =>
                this.stripe.taxRates.create(
                  {
                    display_name: rate.displayName,
                    percentage: Number(rate.percentage),
                    inclusive: rate.inclusive,
                    country: rate.country,
                    ...(rate.region ? { state: rate.region } : {}),
                    ...(rate.description ? { description: rate.description } : {}),
                    metadata: { [KASSA_ORG_KEY]: session.orgId, kassa_tax_rate_id: rate.id },
                  },
                  { idempotencyKey: `kassa_tax_rate_${rate.id}` },
                ),
              INTERACTIVE,
            );
            return created.id;
          } catch (err) {
            throw this.refused(err) ?? this.unreachable(err, 'create a tax rate', 'The card processor could not take the tax rate; retry with the same Idempotency-Key');
          }
        }),
      );
    }
    return ids;
  }

  /** The session's Stripe coupon (stripe-coupons.ts); 400 for a duration Stripe cannot express, 503 when Stripe cannot be reached. */
  private async stripeCoupon(session: CheckoutSession): Promise<string | undefined> {
    try {
      return await stripeCouponFor(this.stripe, session);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw this.refused(err) ?? this.unreachable(err, 'create a coupon', 'The card processor could not take the coupon; retry with the same Idempotency-Key');
    }
  }

  /** `expiresAt`: when the Stripe Checkout Session expires, which the Kassa session takes (never earlier than it asked). */
  async open(session: CheckoutSession, handOff?: string): Promise<{ processorSessionId: string; url: string; expiresAt: Date }> {
    const recurring = stripeRecurring(session);
    const expiresAt = stripeExpiresAt(session.expiresAt, this.clock.now());
    const ids = { [KASSA_SESSION_KEY]: session.id, [KASSA_ORG_KEY]: session.orgId };
    const page = `${this.publicBaseUrl}/checkout/${session.pageToken}`;
    // Tax (issue 39): the line item's tax_rates on a payment; on a subscription the subscription's
    // default_tax_rates, so every invoice Stripe bills (renewals too) carries the same rates.
    // A session without a location (and an organization with rates) is never opened: Kassa's own
    // page asks the country first (CheckoutSessionService.handOffWithLocation, docs/tax.md).
    const taxRates = await this.stripeTaxRateIds(session);
    // A coupon (issue 39): Kassa's, made once into Stripe's, taken off by Stripe (stripe-coupons.ts).
    const coupon = await this.stripeCoupon(session);
    const params: Stripe.Checkout.SessionCreateParams = {
      mode: recurring ? 'subscription' : 'payment',
      line_items: [
        {
          quantity: session.quantity,
          price_data: {
            currency: session.currency.toLowerCase(),
            unit_amount: session.pricing.amount,
            product_data: { name: session.product.name, ...(session.product.description && { description: session.product.description }) },
            ...(recurring && { recurring }),
          },
          ...(!recurring && taxRates.length > 0 && { tax_rates: taxRates }),
        },
      ],
      ...(session.customerEmail && { customer_email: session.customerEmail }),
      client_reference_id: session.id,
      metadata: ids,
      ...(recurring
        ? { subscription_data: { metadata: ids, ...destinationTransfer(session), ...stripeTrial(session), ...(taxRates.length > 0 && { default_tax_rates: taxRates }) } }
        : { payment_intent_data: { metadata: ids, ...destinationTransfer(session) } }),
      // A trial the buyer may start without a card (issue 39): Stripe asks for one only if it must.
      ...(recurring && session.pricing.trialDays && session.pricing.trialPaymentMethodCollection === 'IF_REQUIRED' && { payment_method_collection: 'if_required' as const }),
      ...(coupon && { discounts: [{ coupon }] }),
      expires_at: expiresAt,
      success_url: `${page}/complete`,
      cancel_url: `${page}/canceled`,
    };
    try {
      // A hand-off from the location step (docs/tax.md) is keyed by it and by the expiry it asks
      // (computed from now): the SDK's retries reuse the key, a later step never meets Stripe's
      // refusal of a key reused with other parameters.
      const idempotencyKey = `kassa_checkout_${session.orgId}_${session.id}${handOff ? `_${handOff}_${expiresAt}` : ''}`;
      const created = await withStripeRetries(() => this.stripe.checkout.sessions.create(params, { idempotencyKey }), INTERACTIVE);
      if (!created.url) throw new Error(`Stripe returned Checkout Session ${created.id} without a url`);
      return { processorSessionId: created.id, url: created.url, expiresAt: new Date(expiresAt * 1000) };
    } catch (err) {
      if (session.processorAccountId && isDestinationRefusal(err)) throw forbidden("The organization's Stripe connected account cannot receive payments now (Stripe refused it as the destination); check the account in Stripe or unbind it");
      // Not the merchant's input (expiresIn was checked): the create reached Stripe later than the
      // headroom covers, or this server's clock is off. A retry computes the expiry afresh.
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.param === 'expires_at') {
        this.logger.warn({ stripe: { type: err.type, code: err.code, requestId: err.requestId }, expiresAt }, "Stripe refused the Checkout Session's expires_at: the create took longer than the headroom, or this server's clock is off");
        throw serviceUnavailable("The card processor measured the checkout's expiry from a later time than this server's (a slow request or a clock off); retry with the same Idempotency-Key");
      }
      throw this.refused(err) ?? this.unreachable(err, 'create a Checkout Session', 'The card processor could not open the checkout; retry with the same Idempotency-Key');
    }
  }

  async close(processorSessionId: string): Promise<'closed' | 'completed'> {
    try {
      const current = await withStripeRetries(() => this.stripe.checkout.sessions.retrieve(processorSessionId), INTERACTIVE);
      if (current.status === 'complete') return 'completed';
      if (current.status === 'expired') return 'closed';
      const expired = await withStripeRetries(() => this.stripe.checkout.sessions.expire(processorSessionId, {}, { idempotencyKey: `kassa_expire_${processorSessionId}` }), INTERACTIVE);
      return expired.status === 'complete' ? 'completed' : 'closed';
    } catch (err) {
      // The buyer completed it between our read and the expiry: Stripe refuses to expire it.
      if (err instanceof Stripe.errors.StripeInvalidRequestError) {
        const current = await this.stripe.checkout.sessions.retrieve(processorSessionId).catch(() => undefined);
        if (current?.status === 'complete') return 'completed';
        if (current?.status === 'expired') return 'closed';
      }
      throw this.unreachable(err, 'expire a Checkout Session', 'The card processor could not be reached to close the checkout; retry');
    }
  }

  /**
   * A permanent refusal of the create: retrying the same request cannot succeed, so it is no 503.
   * Stripe's 400 (an amount below Stripe's minimum, a currency Stripe does not take) → 400 with
   * Stripe's reason; Stripe refusing Kassa's key (401, 403) → 403, the card payment account is
   * not usable. Undefined for what a retry may fix (429, 5xx, network).
   */
  private refused(err: unknown): AppError | undefined {
    if (!(err instanceof Stripe.errors.StripeError)) return undefined;
    const stripe = { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId };
    if (err instanceof Stripe.errors.StripeInvalidRequestError) {
      this.logger.info({ stripe }, 'Stripe refused to create a Checkout Session');
      return validationError(`The card processor refused this checkout${err.code ? ` (${err.code})` : ''}: ${err.message}`);
    }
    if (err instanceof Stripe.errors.StripeAuthenticationError || err instanceof Stripe.errors.StripePermissionError) {
      this.logger.error({ stripe }, 'Stripe refused the secret key (STRIPE_SECRET_KEY): card checkout cannot be opened');
      return forbidden('The card payment account is not usable: the card processor refused this deployment\'s credentials');
    }
    return undefined;
  }

  private unreachable(err: unknown, what: string, message: string): AppError {
    const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId } : undefined;
    this.logger.warn({ err: stripe ? undefined : err, stripe }, `Stripe: could not ${what}`);
    // Rate limited longer than Kassa waits: the client is told when Stripe expects to take calls again.
    const wait = retryAfterMs(err);
    const error = serviceUnavailable(message);
    return wait === undefined ? error : new AppError(error.code, message, { headers: { 'Retry-After': String(Math.ceil(wait / 1000)) } });
  }
}

/** Refunds through Stripe (`POST /v1/refunds` on the order's PaymentIntent). */
export class StripeRefunds implements CardRefunds {
  constructor(
    private readonly stripe: Stripe,
    private readonly logger: Logger,
  ) {}

  async refund(input: Parameters<CardRefunds['refund']>[0]): Promise<{ refundId: string; status: RefundStatus; failureReason: string | null }> {
    try {
      const params: Stripe.RefundCreateParams = {
        payment_intent: input.processorPaymentId,
        amount: input.amount,
        ...(input.reverseTransfer && { reverse_transfer: true }),
        ...(input.reason && { reason: input.reason }),
      };
      const refund = await withStripeRetries(() => this.stripe.refunds.create(params, { idempotencyKey: input.idempotencyKey }), INTERACTIVE);
      return { refundId: refund.id, status: refundStatus(refund.status), failureReason: refund.failure_reason ?? null };
    } catch (err) {
      // Stripe refused it (already refunded, disputed, a key reused with another amount): not retryable as is.
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripeIdempotencyError) {
        this.logger.warn({ stripe: { type: err.type, code: err.code, requestId: err.requestId } }, 'Stripe refused a refund');
        throw conflict(`Stripe refused the refund: ${err.message}`);
      }
      const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, statusCode: err.statusCode, requestId: err.requestId } : undefined;
      this.logger.warn({ err: stripe ? undefined : err, stripe }, 'Stripe: could not create a refund');
      throw serviceUnavailable('Stripe could not be reached to refund the payment; nothing was refunded in Kassa, retry');
    }
  }
}

/**
 * The event types StripeEventService.apply handles: the events to select on Stripe's webhook
 * endpoint (docs/card-processors.md), and those reconciliation reads from Stripe's event list.
 */
export const STRIPE_EVENT_TYPES = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'checkout.session.expired',
  'payment_intent.payment_failed',
  'charge.refunded',
  'charge.refund.updated',
  'refund.created',
  'refund.updated',
  'refund.failed',
  'charge.dispute.created',
  'charge.dispute.updated',
  'charge.dispute.closed',
  'invoice.created',
  'invoice.paid',
  'invoice.payment_failed',
  'invoice.payment_action_required',
  'account.updated',
  'customer.subscription.updated',
  'customer.subscription.deleted',
] as const satisfies readonly Stripe.Event.Type[];

const HANDLED_TYPES: ReadonlySet<string> = new Set(STRIPE_EVENT_TYPES);

/**
 * Stripe's webhook events. Each is verified with the endpoint's signing secret, applied at most
 * once by event id (remembered after it was applied: applying is idempotent, so a crash in
 * between only applies it again), and applied from the object's current state read back from
 * Stripe, never from the event's copy: events arrive late, twice, and out of order.
 */
export class StripeEventService {
  private readonly paymentEvents: StripePaymentEvents;

  constructor(
    private readonly stripe: Stripe,
    private readonly webhookSecret: string,
    private readonly events: StripeEventRepository,
    private readonly uow: CommerceUnitOfWork,
    private readonly payments: PaymentFlow,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly subscriptions: StripeSubscriptionEvents,
    /** Whether this deployment has the organization (orphan Checkout Sessions: stripe-payment-events.ts). */
    isOwnOrganization: (orgId: string) => Promise<boolean>,
    refunds: RefundFlow,
    /** Connect's `account.updated`: what Stripe now says of a connected account (stripe-connect.ts). */
    private readonly accountUpdated: (accountId: string) => Promise<StripeEventOutcome> = async () => 'ignored',
    /** A Kassa session whose Stripe Checkout Session expired unpaid: its coupon's redemption is given back (issue 39). */
    private readonly expiredUnpaid: (session: CheckoutSession) => Promise<void> = async () => undefined,
    /** Tax rates (issue 39): the rate Stripe chose by address is read back into Kassa's (dynamic tax rates). */
    private readonly taxRates?: StripeTaxRates,
  ) {
    this.paymentEvents = new StripePaymentEvents(stripe, uow, refunds, clock, logger, isOwnOrganization, (id) => this.applyCheckoutSession(id));
  }

  /** A delivery to the endpoint: verified and checked (stripe-event-intake.ts, 400 otherwise), then processed. */
  async receive(payload: Buffer, signature: string | undefined): Promise<StripeEventOutcome> {
    const event = verifiedStripeEvent(this.stripe, { payload, signature, secret: this.webhookSecret, now: this.clock.now(), handledTypes: HANDLED_TYPES });
    return this.process(event);
  }

  /** Applies a verified event (a webhook's, or one read from Stripe's event list) once by id. */
  async process(event: Stripe.Event): Promise<StripeEventOutcome> {
    if (await this.events.isProcessed(event.id)) return 'duplicate';
    const outcome = await this.apply(event);
    await this.events.markProcessed(event.id, event.type, this.clock.now());
    return outcome;
  }

  private async apply(event: Stripe.Event): Promise<StripeEventOutcome> {
    switch (event.type) {
      case 'checkout.session.completed':
      case 'checkout.session.async_payment_succeeded':
      case 'checkout.session.async_payment_failed':
      case 'checkout.session.expired':
        return this.applyCheckoutSession(event.data.object.id);
      case 'invoice.created':
        return this.subscriptions.applyDraft(event.data.object.id, (id) => this.applyCheckoutSession(id));
      case 'invoice.paid':
      case 'invoice.payment_failed':
        return this.subscriptions.applyInvoice(event.data.object.id, (id) => this.applyCheckoutSession(id));
      case 'invoice.payment_action_required':
        return this.subscriptions.applyActionRequired(event.data.object.id, (id) => this.applyCheckoutSession(id));
      case 'account.updated':
        return this.accountUpdated(event.data.object.id);
      case 'customer.subscription.updated':
      case 'customer.subscription.deleted':
        return this.subscriptions.applySubscription(event.data.object.id, (id) => this.applyCheckoutSession(id));
      case 'payment_intent.payment_failed':
        return this.paymentEvents.paymentFailed(event);
      case 'charge.refunded':
      case 'charge.refund.updated':
      case 'refund.created':
      case 'refund.updated':
      case 'refund.failed':
        return this.paymentEvents.refundsChanged(event);
      case 'charge.dispute.created':
      case 'charge.dispute.updated':
      case 'charge.dispute.closed':
        return this.paymentEvents.dispute(event);
      default:
        // Acknowledged, so Stripe stops sending it; the endpoint's event list should not include it.
        return 'ignored';
    }
  }

  /**
   * Stripe's `amount_total` is Kassa's session amount (its lines: charges, DISCOUNT, TAX): the
   * order is written from Kassa's lines, so a difference (a coupon or tax rounded otherwise by
   * Stripe) is logged for the operator, with both figures.
   */
  private checkAmount(session: CheckoutSession, current: Stripe.Checkout.Session): void {
    if (current.amount_total === null || current.amount_total === session.amount) return;
    this.logger.warn(
      { checkoutSessionId: session.id, stripeSessionId: current.id, kassaAmount: session.amount, stripeAmountTotal: current.amount_total, stripeDiscount: current.total_details?.amount_discount ?? null },
      "Stripe: the Checkout Session's amount_total differs from Kassa's session amount; the order carries Kassa's lines",
    );
  }

  /**
   * The tax Stripe chose from the buyer's billing address for a Checkout Session an earlier
   * release sent with dynamic tax rates (issue 39; kept for sessions opened before the upgrade,
   * at most Stripe's 24 hours, then to be removed): the location is the address's country (and state, in the US), the rates
   * are the Kassa rates of the Stripe tax rates in `total_details.breakdown.taxes` (each Stripe
   * rate names its Kassa rate in its metadata, checked against the id Kassa recorded for it).
   * No matching rate: the location with no rates (no TAX line). Undefined for a session created
   * with a location (its tax is Kassa's own) or one already given its tax.
   */
  private async dynamicTax(session: CheckoutSession, current: Stripe.Checkout.Session): Promise<TaxContext | undefined> {
    if (session.tax || current.metadata?.[KASSA_DYNAMIC_TAX_KEY] !== 'true' || !this.taxRates) return undefined;
    const address = current.customer_details?.address;
    if (!address?.country) {
      this.logger.warn({ checkoutSessionId: session.id, stripeSessionId: current.id }, 'Stripe: a Checkout Session sent with dynamic tax rates completed without a billing address; no tax recorded');
      return undefined;
    }
    const country = address.country.toUpperCase();
    const rates: TaxRateSnapshot[] = [];
    for (const t of current.total_details?.breakdown?.taxes ?? []) {
      const kassaId = t.rate.metadata?.kassa_tax_rate_id;
      const rate = kassaId ? await this.taxRates.get(session.orgId, kassaId).catch(() => undefined) : undefined;
      if (!rate || rate.stripeTaxRateId !== t.rate.id) {
        this.logger.error({ checkoutSessionId: session.id, stripeSessionId: current.id, stripeTaxRateId: t.rate.id }, "Stripe: a Checkout Session's tax rate is not one Kassa made for this organization; the order is written without it");
        continue;
      }
      rates.push({ rateId: rate.id, displayName: rate.displayName, percentage: rate.percentage, inclusive: rate.inclusive });
    }
    return { location: { country, region: country === 'US' && address.state ? address.state.toUpperCase() : null, taxId: null }, rates, reverseCharge: false };
  }

  /** Applies what the Checkout Session is now, whichever of its events arrived. */
  private async applyCheckoutSession(stripeSessionId: string): Promise<StripeEventOutcome> {
    let current: Stripe.Checkout.Session;
    try {
      current = await withStripeRetries(() => this.stripe.checkout.sessions.retrieve(stripeSessionId, { expand: ['payment_intent', 'total_details.breakdown'] }), INTERACTIVE);
    } catch (err) {
      // Not on this account (another account's or mode's event, or one Stripe no longer has): a
      // redelivery cannot change that, so it is acknowledged, as unknown charges and disputes are.
      if (err instanceof Stripe.errors.StripeInvalidRequestError && err.code === 'resource_missing') {
        this.logger.warn({ stripeSessionId }, 'Stripe: an event names a Checkout Session Stripe does not have for this account; acknowledged and ignored');
        return 'ignored';
      }
      const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, statusCode: err.statusCode, requestId: err.requestId } : undefined;
      this.logger.warn({ stripe, stripeSessionId }, 'Stripe: could not read a Checkout Session back; Stripe redelivers the event');
      throw serviceUnavailable('Stripe could not be reached to read the Checkout Session back; redeliver the event');
    }
    const kassaId = current.client_reference_id;
    const orgId = current.metadata?.[KASSA_ORG_KEY];
    const session = kassaId && orgId ? await this.uow.stores.sessions.find(orgId, kassaId) : undefined;
    // One Kassa never stored (a create that timed out or lost its race: refunded if paid), or another integration's.
    if (!session || session.processorSessionId !== current.id) return this.paymentEvents.refundOrphan(current);

    if (current.status === 'expired') {
      // Closed by Kassa for the buyer's change of country on its page (docs/tax.md): the Kassa
      // session goes on with the Checkout Session opened for the new country.
      if (session.locationStep && session.processorUrl === null) return 'ignored';
      const expired = await this.payments.expireUnpaid(session.id);
      if (expired.status === 'EXPIRED') await this.expiredUnpaid(expired);
      return 'applied';
    }
    if (current.status !== 'complete') return 'ignored';
    const tax = await this.dynamicTax(session, current);
    this.checkAmount(tax ? { ...session, amount: priceWithTax(sessionLineInputs(session), tax).total } : session, current);
    const intent = typeof current.payment_intent === 'object' ? current.payment_intent : null;
    const paymentId = intent?.id ?? (typeof current.payment_intent === 'string' ? current.payment_intent : null) ?? current.id;
    // A subscription checkout: its first invoice's payment, and the Stripe subscription Kassa's starts from.
    const subscription = current.mode === 'subscription' ? await this.subscriptions.firstPayment(current) : undefined;
    const base = {
      checkoutSessionId: session.id,
      processorPaymentId: paymentId,
      ...(tax && { tax }),
      ...(intent && { processorStatus: intent.status }),
      customerEmail: current.customer_details?.email ?? undefined,
      ...subscription,
    };
    if (current.payment_status === 'paid' || current.payment_status === 'no_payment_required') {
      await this.payments.applyPaymentResult({ ...base, outcome: 'succeeded' });
    } else if (intent && (intent.status === 'requires_payment_method' || intent.status === 'canceled')) {
      // An asynchronous payment that failed: the order exists as PENDING first, as on the sandbox.
      await this.payments.applyPaymentResult({ ...base, outcome: 'pending' });
      await this.payments.applyPaymentResult({ ...base, outcome: 'failed' });
    } else {
      await this.payments.applyPaymentResult({ ...base, outcome: 'pending' });
    }
    return 'applied';
  }
}

/**
 * A session's free trial as Stripe Checkout takes it (issue 39): `trial_period_days`, and for a
 * trial without a card, `trial_settings.end_behavior.missing_payment_method: cancel` (Kassa's own
 * rule on the sandbox: nothing to charge, the subscription ends). Stripe then makes a $0 first
 * invoice; its subscription is `trialing` (Kassa: ACTIVE with `trialEnd`).
 */
function stripeTrial(session: CheckoutSession): Pick<Stripe.Checkout.SessionCreateParams.SubscriptionData, 'trial_period_days' | 'trial_settings'> {
  const days = session.pricing.trialDays;
  if (!days) return {};
  return {
    trial_period_days: days,
    ...(session.pricing.trialPaymentMethodCollection === 'IF_REQUIRED' && { trial_settings: { end_behavior: { missing_payment_method: 'cancel' as const } } }),
  };
}
