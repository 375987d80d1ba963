/**
 * Checkout sessions: idempotent creation, reads, expiry (by request, by sweeper, on read), the
 * hosted page's payment, and sessions opened from payment links.
 */
import canonicalize from 'canonicalize';
import type { components } from '../../generated/merchant.js';
import type { Clock } from '../kernel/clock.js';
import { newId, randomToken } from '../kernel/ids.js';
import { STABLECOINS } from '../kernel/money.js';
import { assertAmountBounds, assertTrialDays, isFiatCurrency } from '../catalog/price-rules.js';
import { sha256Hex } from '../kernel/secrets.js';
import { AppError, conflict, forbidden, notFound, validationError } from '../kernel/errors.js';
import { OrgService } from '../orgs/orgs.service.js';
import type { Organization } from '../orgs/orgs.repository.js';
import type { CatalogService } from '../catalog/catalog.service.js';
import { assertWritten, type CommerceUnitOfWork, type DiscountIds, type SessionOrder } from '../commerce/stores.js';
import { restoreUnpaidDraw, trialOf, type PaymentFlow } from '../commerce/payment-flow.js';
import type { Order } from '../commerce/model.js';
import type { CardDetails, CardProcessor, HostedCardCheckout } from '../processors/card-processor.js';
import { stripeCouponDuration } from '../processors/stripe-coupons.js';
import { CRYPTO_EXPIRES_IN, type CryptoQuoteService, type PreparedQuote, type QuoteView, presentQuote } from '../crypto-payments/crypto-quote.service.js';
import type { CheckoutSession, IdempotencyRecord, PricingSnapshot, ProductSnapshot } from '../commerce/model.js';
import { sessionChargeInputs, sessionLineInputs } from '../commerce/order-lines.js';
import { DiscountRefusal, type DiscountService } from '../discounts/discount.service.js';
import { formatMoney } from '../kernel/money.js';
import { pricePeriod } from '../commerce/pricing.js';
import { priceWithTax, type TaxContext } from '../commerce/tax.js';
import type { TaxService } from '../tax/tax.service.js';

export type CheckoutSessionCreate = components['schemas']['CheckoutSessionCreate'];

/** Idempotency keys are remembered this long; after that the same key starts a new checkout. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
const CARD_EXPIRES_IN = { min: 1800, max: 86400 };
const DEFAULT_EXPIRES_IN = 3600;
/** Limits of payment-link query parameters, the same as a session's `metadata`. */
const METADATA_LIMITS = { pairs: 50, keyLength: 40, valueLength: 500 };
const MAX_REFERENCE_BYTES = 255;

export type PaymentAttempt =
  | { kind: 'paid' | 'pending'; session: CheckoutSession; order: Order }
  | { kind: 'declined'; session: CheckoutSession; message: string }
  /** The amount due moved since the page was shown (the customer's balance changed): nothing charged, the page shown again (409). */
  | { kind: 'changed'; session: CheckoutSession; message: string }
  | { kind: 'not_payable'; session: CheckoutSession }
  /** The processor already accepted a payment for this session (a concurrent second attempt). */
  | { kind: 'processing'; session: CheckoutSession };

export class CheckoutSessionService {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly orgs: OrgService,
    private readonly catalog: CatalogService,
    private readonly payments: PaymentFlow,
    private readonly processor: CardProcessor,
    private readonly clock: Clock,
    /** The crypto rail (`provider: CRYPTO`); absent → crypto checkout is refused. */
    private readonly crypto?: CryptoQuoteService,
    /** A card processor with its own checkout page (Stripe); absent → the sandbox takes cards on Kassa's page. */
    private readonly hosted?: HostedCardCheckout,
    /** Coupons and promotion codes (issue 39); absent → no discounts. */
    private readonly discounts?: DiscountService,
    /** Tax rates (issue 39); absent → no session is taxed. */
    private readonly tax?: TaxService,
  ) {}

  /** The rail a session is paid on, as its pages name it (footer): Kassa's sandbox card page, Stripe Checkout, or a crypto transfer. */
  railOf(session: CheckoutSession): 'sandbox' | 'stripe' | 'crypto' {
    if (session.provider === 'CRYPTO') return 'crypto';
    return this.hosted ? 'stripe' : 'sandbox';
  }

  isPayable(session: CheckoutSession): boolean {
    return session.status === 'CREATED' && session.expiresAt.getTime() > this.clock.now().getTime();
  }

  /**
   * Creates a session once per (organization, Idempotency-Key). Concurrent retries race on the
   * key's primary key in PostgreSQL: one inserts, the others wait for it to commit and replay it.
   * Nothing is stored before validation passes, so a failed creation never blocks a retry.
   *
   * A fresh key is the common case, so the key is claimed by the insert itself (one round trip
   * for key and session) rather than looked up first; a key older than the TTL is taken over by
   * that same insert. A request whose validation fails still replays a live key's session, as if
   * the key had been looked up first: a retry must see the outcome of the original request.
   * `org` is the organization as authentication read it (saves a read); absent, it is loaded.
   */
  async create(
    orgId: string,
    idempotencyKey: string,
    body: CheckoutSessionCreate,
    org?: Organization,
  ): Promise<{ session: CheckoutSession; replayed: boolean }> {
    const now = this.clock.now();
    const requestHash = sha256Hex(canonicalize(body) ?? '');
    const stores = this.uow.stores;
    const expiredBefore = new Date(now.getTime() - IDEMPOTENCY_TTL_MS);
    const liveRecord = async () => {
      const record = await stores.sessions.findIdempotencyRecord(orgId, idempotencyKey);
      return record && record.createdAt.getTime() >= expiredBefore.getTime() ? record : undefined;
    };

    let built: Awaited<ReturnType<CheckoutSessionService['build']>>;
    try {
      built = await this.build(orgId, body, now, org);
    } catch (err) {
      const existing = err instanceof AppError ? await liveRecord() : undefined;
      if (existing) return { session: await this.replay(existing, requestHash), replayed: true };
      throw err;
    }
    const { crypto } = built;
    let session = built.session;
    const record = { orgId, key: idempotencyKey, requestHash, checkoutSessionId: session.id, createdAt: now };
    let claimed = false;
    if (this.hosted && session.provider === 'STRIPE') {
      // The processor's checkout is opened before anything is stored (a create that cannot reach
      // it leaves nothing behind), so a retry of a stored key must not open a second one.
      const existing = await liveRecord();
      if (existing) return { session: await this.replay(existing, requestHash), replayed: true };
      claimed = await this.claimBeforeHandOff(session, body);
      try {
        // Without the buyer's location (and with rates), Stripe's page opens from Kassa's location
        // step once the buyer gave the country (handOffWithLocation), with fixed rates for it.
        if (!session.locationStep) session = await this.openHosted(session);
      } catch (err) {
        if (claimed) await this.discounts!.release(session.id);
        throw err;
      }
    }
    // A card session is the key and the session row: one statement. A crypto session also
    // reserves its exact amount, so it needs the transaction.
    const created = crypto
      ? await this.uow.transaction(async (tx) => {
          const claimed = await tx.sessions.insertIdempotencyRecord(record, expiredBefore);
          if (!claimed) return false;
          await tx.sessions.insert(session);
          await this.crypto!.store(tx, session, crypto);
          return true;
        })
      : claimed
        ? await this.storeClaimed(record, session, expiredBefore)
        : await stores.sessions.insertWithIdempotencyRecord(record, session, expiredBefore);
    if (created === 'swept') {
      // The orphan-claim sweep gave the claim back while Stripe was being called (the create took
      // longer than the sweep's delay), and the limit no longer allows it: nothing is stored.
      if (session.processorSessionId) await this.hosted!.close(session.processorSessionId).catch(() => undefined);
      throw conflict('The discount could not be kept for this checkout (opening it took too long and the redemption was given back); nothing was opened, create the checkout again with a new Idempotency-Key');
    }
    if (created) return { session, replayed: false };
    // A concurrent request with the same key won: the checkout opened for this one is closed unused.
    if (session.processorSessionId) await this.hosted!.close(session.processorSessionId).catch(() => undefined);
    if (claimed) await this.discounts!.release(session.id);
    const winner = await liveRecord();
    if (!winner) throw new AppError('SERVICE_UNAVAILABLE', 'Concurrent creation with this Idempotency-Key did not settle; retry with the same key');
    return { session: await this.replay(winner, requestHash), replayed: true };
  }

  /**
   * The Stripe connected account a new card session pays (the org's binding), recorded on the
   * session. Refused (403, naming the cause) when Stripe has reported that account unable to take
   * payments (Connect `account.updated`), rather than a Stripe refusal at the create.
   */
  private connectedAccountOf(org: Organization, provider: CheckoutSession['provider']): string | null {
    if (!this.hosted || provider !== 'STRIPE') return null;
    const problem = OrgService.stripeAccountProblem(org);
    if (problem) throw forbidden(`${problem}; card checkout is unavailable for this organization until Stripe reports the account usable again`);
    return org.stripeAccountId;
  }

  /**
   * On Stripe the buyer pays on Stripe's page, where Kassa cannot refuse a coupon any more: the
   * redemption is claimed when Kassa hands the session to Stripe, before Stripe's session is
   * opened (issue 39). A limit reached (a concurrent buyer took the last one) is a 400 naming the
   * field, with nothing opened; a create that then fails gives it back, and so does Stripe's
   * session expiring unpaid (`checkout.session.expired`, src/services.ts). A code limited per buyer
   * (first order, once per customer) needs `customerEmail`: Stripe asks the e-mail after the claim.
   */
  private async claimBeforeHandOff(session: CheckoutSession, body: CheckoutSessionCreate): Promise<boolean> {
    const discount = session.pricing.discount;
    if (!discount || !this.discounts) return false;
    const field = body.discounts?.[0]?.coupon !== undefined ? 'body.discounts[0].coupon' : 'body.discounts[0].promotionCode';
    try {
      await this.discounts.claim(session.orgId, session.id, discount, session.customerEmail ?? '');
    } catch (err) {
      if (err instanceof DiscountRefusal) throw validationError(`${field}: ${err.message}`);
      throw err;
    }
    return true;
  }

  /**
   * Stores a session whose redemption was claimed before Stripe's session was opened: in one
   * transaction that first locks the redemption (RedemptionLedger.takeBack: 'held' when it is still
   * counted), so the orphan-claim sweep (src/processors/stripe-redemption-sweep.ts), which locks
   * it too before giving it back, and this store serialize. A claim the sweep gave back meanwhile
   * is taken back within the limits; refused: 'swept', nothing stored.
   */
  private storeClaimed(record: IdempotencyRecord, session: CheckoutSession, expiredBefore: Date): Promise<boolean | 'swept'> {
    return this.uow.transaction(async (tx) => {
      const held = await tx.redemptions.takeBack(session.id, this.clock.now());
      if (held === 'refused' || held === 'none') return 'swept';
      return tx.sessions.insertWithIdempotencyRecord(record, session, expiredBefore);
    });
  }

  private async openHosted(session: CheckoutSession): Promise<CheckoutSession> {
    const opened = await this.hosted!.open(session);
    return { ...session, processorSessionId: opened.processorSessionId, processorUrl: opened.url, expiresAt: opened.expiresAt };
  }

  private async replay(record: IdempotencyRecord, requestHash: string): Promise<CheckoutSession> {
    if (record.requestHash !== requestHash) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with different parameters; use a new key for a new checkout');
    }
    const session = await this.get(record.orgId, record.checkoutSessionId);
    if (!this.isPayable(session)) {
      throw conflict(`The checkout session created with this Idempotency-Key can no longer be paid (status ${session.status}); use a new key to start a new checkout`);
    }
    return session;
  }

  private async build(
    orgId: string,
    body: CheckoutSessionCreate,
    now: Date,
    knownOrg?: Organization,
  ): Promise<{ session: CheckoutSession; crypto?: PreparedQuote }> {
    const provider = body.provider ?? 'STRIPE';
    const org = knownOrg ?? (await this.orgs.getOrganization(orgId));
    // Card verification and the card account gate the card rail only; a frozen org opens nothing.
    const refusal = provider === 'CRYPTO' ? OrgService.checkoutRefusal(org) : OrgService.cardCheckoutRefusal(org);
    if (refusal) throw refusal;
    const bounds = provider === 'CRYPTO' ? CRYPTO_EXPIRES_IN : CARD_EXPIRES_IN;
    const expiresIn = body.expiresIn ?? DEFAULT_EXPIRES_IN;
    if (expiresIn < bounds.min || expiresIn > bounds.max) {
      throw validationError(`body.expiresIn must be between ${bounds.min} and ${bounds.max} seconds for ${provider === 'CRYPTO' ? 'crypto' : 'card'} checkout`);
    }
    const { pricing: purchased, product } = await this.resolvePurchase(orgId, body, provider);
    const quantity = body.quantity ?? 1;
    const pricing = await this.withDiscount(orgId, withTrial(purchased, body), product, provider, body);
    // The total is what is charged and what the order's display amount is derived from: priced
    // from the session's lines by the one pricing function (commerce/pricing.ts).
    const unit = body.pricingId ? `The amount of body.pricingId ${body.pricingId}` : 'body.pricingData.amount';
    const what = quantity === 1 ? unit : `${unit} × body.quantity`;
    // The rail's bounds first, on the product of two integers: a price stored before the bounds (up to
    // 2^53 - 1) is refused with its figure before the pricing function sees an amount it does not take.
    assertAmountBounds(provider, pricing.currency, pricing.amount * quantity, what);
    assertAmountBounds(provider, pricing.currency, pricePeriod(sessionChargeInputs({ quantity, pricing, product })).total, what);
    // The buyer's location, when the merchant gives it: the session's tax (issue 39, src/commerce/tax.ts).
    const tax = body.customerTax ? await this.taxContext(orgId, body.customerTax, 'body.customerTax') : null;
    // On Stripe Checkout's page Kassa cannot ask the location: its own page asks it first.
    const locationStep = !tax && (await this.asksLocationFirst(orgId, provider));
    // Charges → DISCOUNT → TAX on the discounted amount. A discount may bring the total down to 0 (a
    // free order, as a trial's): the charges are bounded, and with tax the charges' taxed total.
    if (tax?.rates.length) assertAmountBounds(provider, pricing.currency, priceWithTax(sessionChargeInputs({ quantity, pricing, product }), tax).total, `${what} with tax`);
    const amount = priceWithTax(sessionLineInputs({ quantity, pricing, product }), tax).total;
    const crypto = provider === 'CRYPTO' ? await this.prepareCrypto(orgId, pricing, body.pricingId ? 'body.pricingId' : 'body.pricingData') : undefined;

    let customerId: string | null = null;
    let customerEmail: string | null = body.customerEmail?.trim() ?? null;
    if (body.customerId) {
      const customer = await this.uow.stores.customers.find(orgId, body.customerId);
      if (!customer) throw validationError(`body.customerId ${body.customerId} is not a customer of this organization`);
      customerId = customer.id;
      customerEmail = customer.email;
    }
    let customerExternalId: string | null = null;
    if (body.customerExternalId !== undefined) {
      const holder = await this.uow.stores.customers.findByExternalId(orgId, body.customerExternalId);
      if (holder && customerId !== null && holder.id !== customerId) {
        throw validationError(`body.customerExternalId ${body.customerExternalId} belongs to another customer than body.customerId`);
      }
      if (holder) {
        customerId = holder.id;
        customerEmail = holder.email;
      } else {
        customerExternalId = body.customerExternalId;
      }
    }

    const session: CheckoutSession = {
      id: newId('CS'),
      orgId,
      status: 'CREATED',
      provider,
      amount,
      currency: pricing.currency,
      quantity,
      pricing,
      product,
      customerId,
      customerEmail,
      customerNamed: customerId !== null,
      customerExternalId,
      merchantReference: body.merchantReference ?? null,
      metadata: body.metadata ?? null,
      successUrl: body.successUrl ?? null,
      cancelUrl: body.cancelUrl ?? null,
      paymentLinkId: null,
      pageToken: randomToken(32),
      lastError: null,
      processorSessionId: null,
      processorUrl: null,
      processorAccountId: this.connectedAccountOf(org, provider),
      tax,
      locationStep,
      expiresAt: new Date(now.getTime() + expiresIn * 1000),
      createdAt: now,
      updatedAt: now,
    };
    return { session, crypto };
  }

  /**
   * The merchant's `discounts` (issue 39): one coupon or promotion code, checked against the
   * purchase (400 naming the field). Card checkouts on the sandbox and on Stripe (a Stripe coupon,
   * src/processors/stripe-coupons.ts; docs/discounts.md); crypto quotes exact amounts: none.
   */
  private async withDiscount(orgId: string, pricing: PricingSnapshot, product: ProductSnapshot, provider: 'STRIPE' | 'CRYPTO', body: CheckoutSessionCreate): Promise<PricingSnapshot> {
    const ref = body.discounts?.[0];
    if (!ref) return pricing;
    if (!this.discounts) throw validationError('body.discounts: discounts are not enabled on this deployment');
    if (provider === 'CRYPTO') throw validationError('body.discounts: crypto checkouts take no discount (their exact amounts are quoted); sell at the discounted price instead');
    const field = ref.coupon !== undefined ? 'body.discounts[0].coupon' : 'body.discounts[0].promotionCode';
    try {
      const discount = await this.discounts.resolve(orgId, ref, { currency: pricing.currency, productId: product.productId, email: body.customerEmail ?? null });
      // Stripe Checkout takes it as a Stripe coupon whose duration counts months (src/processors/stripe-coupons.ts).
      if (this.hosted) {
        const onStripe = stripeCouponDuration(discount, pricing);
        if ('refusal' in onStripe) throw validationError(`body.discounts: ${onStripe.refusal}`);
      }
      return { ...pricing, discount };
    } catch (err) {
      if (err instanceof DiscountRefusal) throw validationError(`${field}: ${err.message}`);
      throw err;
    }
  }

  /** Whether the hosted page offers "Add a promotion code" for this session. */
  acceptsPromotionCodes(session: CheckoutSession): boolean {
    if (this.discounts === undefined || session.provider !== 'STRIPE' || !this.isPayable(session) || session.pricing.paymentStarted) return false;
    // Kassa's card page (the sandbox), and on Stripe the location step, where Kassa redeems the code
    // before Stripe's page opens; never Stripe Checkout's page itself (its coupon is fixed when it opens).
    return !this.hosted || this.takesLocationStep(session);
  }

  /**
   * The hosted page's "Add a promotion code" (or, with `code` null, "Remove"): the session's
   * discount and amount change together, while it is open, no payment has started and its amount
   * is still the one read (a conditional write). Returns the session, or a human message. On the
   * Stripe rail's location step, see `setStepPromotionCode` (`paid`: the buyer paid meanwhile).
   */
  async setPromotionCode(token: string, code: string | null): Promise<{ session: CheckoutSession; message?: string; paid?: boolean }> {
    const session = await this.findByPageToken(token);
    if (!session) throw notFound('Checkout session');
    if (!this.acceptsPromotionCodes(session)) return { session, message: 'The promotion code of this checkout can no longer change.' };
    const step = this.takesLocationStep(session);
    let pricing: PricingSnapshot;
    if (code === null) {
      const { discount: _, ...rest } = session.pricing;
      pricing = rest;
    } else {
      const text = code.trim();
      if (!/^[A-Za-z0-9_-]{1,40}$/.test(text)) return { session, message: 'Enter a promotion code of letters, digits, - or _.' };
      try {
        // On the step the code is redeemed before Stripe's page asks the e-mail: a code limited per buyer needs the session's.
        const discount = await this.discounts!.resolve(session.orgId, { promotionCode: text }, { currency: session.currency, productId: session.product.productId, email: session.customerEmail, buyerBeforeRedemption: step });
        // Stripe Checkout takes it as a Stripe coupon whose duration counts months (as at creation).
        if (step && 'refusal' in stripeCouponDuration(discount, session.pricing)) return { session, message: `The promotion code ${discount.code ?? text} cannot be used for this purchase.` };
        pricing = { ...session.pricing, discount };
      } catch (err) {
        if (err instanceof DiscountRefusal) return { session, message: err.message };
        throw err;
      }
    }
    const amount = priceWithTax(sessionLineInputs({ quantity: session.quantity, pricing, product: session.product }), session.tax).total;
    if (step) return this.setStepPromotionCode(session, pricing, amount);
    const now = this.clock.now();
    if (!(await this.uow.stores.sessions.setDiscount(session.id, pricing, amount, session.amount, now))) {
      return { session: (await this.findByPageToken(token)) ?? session, message: 'This checkout changed meanwhile; check the total and try again.' };
    }
    return { session: { ...session, pricing, amount, updatedAt: now } };
  }

  /**
   * A promotion code typed or removed on the Stripe rail's location step (issue 39,
   * docs/discounts.md): as a change of country. The same discount again changes nothing and calls
   * no one. Another: a Stripe Checkout Session opened for the old one is closed first (its url
   * goes first, so its `expired` event is not the session's; paid meanwhile → `paid`, nothing
   * changes), then the discount and amount are written while the session is still on that
   * Checkout Session with none open (a conditional write). The next "Continue to payment" opens a
   * new one (handOffWithLocation), which is where the redemption is counted.
   */
  private async setStepPromotionCode(session: CheckoutSession, pricing: PricingSnapshot, amount: number): Promise<{ session: CheckoutSession; message?: string; paid?: boolean }> {
    if (sameDiscount(session.pricing.discount, pricing.discount)) return { session };
    const stores = this.uow.stores.sessions;
    const changed = async () => ({ session: (await this.findByPageToken(session.pageToken)) ?? session, message: 'This checkout changed meanwhile; check the total and try again.' });
    const previous = session.processorSessionId;
    if (previous) {
      if (session.processorUrl !== null && !(await stores.markProcessorClosing(session.id, previous, this.clock.now()))) return changed();
      if ((await this.hosted!.close(previous)) === 'completed') return { session, paid: true };
    }
    const now = this.clock.now();
    if (!(await stores.setStepDiscount(session.id, pricing, amount, session.amount, previous, now))) return changed();
    return { session: { ...session, pricing, amount, processorUrl: null, updatedAt: now } };
  }

  /**
   * Before the first charge of a session with a discount: redeems it (once per session; a limit
   * reached meanwhile refuses it and the discount is taken off, the buyer sees the new total) and
   * fixes the discount for the payment (`paymentStarted`), so the amount charged is the order's.
   */
  private async startPayment(session: CheckoutSession, email: string, expectedDue?: number): Promise<{ session: CheckoutSession } | { message: string; session: CheckoutSession } | { changed: string; session: CheckoutSession }> {
    const changedMessage = 'The total changed: your credit balance moved since this page was shown. Check the amount due and pay again.';
    if (session.pricing.paymentStarted) {
      // A later attempt (after a decline): the draw stays reserved; the page showed what is left to pay.
      const due = session.amount - (session.pricing.balance?.amountCents ?? 0);
      return expectedDue !== undefined && expectedDue !== due ? { changed: changedMessage, session } : { session };
    }
    const drawsBalance = this.drawsBalance(session);
    if (!this.discounts && !drawsBalance) return { session };
    const now = this.clock.now();
    const discount = session.pricing.discount;
    if (discount && this.discounts) {
      try {
        await this.discounts.claim(session.orgId, session.id, discount, email);
      } catch (err) {
        if (!(err instanceof DiscountRefusal)) throw err;
        const { discount: _, ...pricing } = session.pricing;
        const amount = priceWithTax(sessionLineInputs({ quantity: session.quantity, pricing, product: session.product }), session.tax).total;
        const written = await this.uow.stores.sessions.setDiscount(session.id, pricing, amount, session.amount, now);
        const current = written ? { ...session, pricing, amount, updatedAt: now } : ((await this.findByPageToken(session.pageToken)) ?? session);
        return { session: current, message: `${err.message} It was removed: the total is now ${formatMoney(current.amount, current.currency)}.` };
      }
    }
    if (drawsBalance) return this.startPaymentWithBalance(session, expectedDue, changedMessage);
    const pricing = { ...session.pricing, paymentStarted: true };
    if (!(await this.uow.stores.sessions.setDiscount(session.id, pricing, session.amount, session.amount, now))) {
      const current = (await this.findByPageToken(session.pageToken)) ?? session;
      // Another attempt of this page started the payment with the same amount: go on with it.
      if (current.pricing.paymentStarted && current.amount === session.amount) return { session: current };
      return { session: current, message: 'This checkout changed meanwhile; check the total and pay again.' };
    }
    return { session: { ...session, pricing, updatedAt: now } };
  }

  /**
   * The payment's start of a session that draws its customer's balance (issue 39): in one
   * transaction, under the session's row lock and then the balance row's (`lockedBalance`, as an
   * upgrade and a renewal take it), min(balance, total) is drawn as an `APPLIED` entry of the order
   * id reserved for the session and written with `paymentStarted` (a conditional write over the
   * amount read). The due the page showed is compared with the one under the lock: moved → nothing
   * drawn, `changed`. The draw stays reserved across declined attempts and is given back
   * (`RESTORED`) when the session expires unpaid.
   */
  private async startPaymentWithBalance(session: CheckoutSession, expectedDue: number | undefined, changedMessage: string): Promise<{ session: CheckoutSession } | { message: string; session: CheckoutSession } | { changed: string; session: CheckoutSession }> {
    const outcome = await this.uow.transaction(async (tx) => {
      const now = this.clock.now();
      const locked = await tx.sessions.findForUpdate(session.id);
      if (!locked || !this.isPayable(locked) || locked.amount !== session.amount) return { kind: 'moved' as const };
      if (locked.pricing.paymentStarted) return { kind: 'started' as const, session: locked };
      const key = { orgId: locked.orgId, customerId: locked.customerId!, currency: locked.currency };
      const balance = locked.amount > 0 ? await tx.balances.lockedBalance(key) : 0;
      const wanted = Math.min(Math.max(balance, 0), locked.amount);
      if (expectedDue !== undefined && expectedDue !== locked.amount - wanted) return { kind: 'changed' as const, session: locked };
      const orderId = newId('ORD');
      const drawn = wanted > 0 ? await tx.balances.apply({ ...key, wanted, orderId, subscriptionId: null, at: now }) : 0;
      const pricing: PricingSnapshot = { ...locked.pricing, paymentStarted: true, ...(drawn > 0 ? { balance: { orderId, amountCents: drawn } } : {}) };
      assertWritten(await tx.sessions.setDiscount(locked.id, pricing, locked.amount, locked.amount, now), 'checkout session');
      return { kind: 'drawn' as const, session: { ...locked, pricing, updatedAt: now } };
    });
    if (outcome.kind === 'drawn') return { session: outcome.session };
    if (outcome.kind === 'changed') return { changed: changedMessage, session: outcome.session };
    const current = (await this.findByPageToken(session.pageToken)) ?? session;
    if (outcome.kind === 'started') {
      // Another attempt of this page started the payment meanwhile: go on with it if it is the due shown.
      const due = current.amount - (current.pricing.balance?.amountCents ?? 0);
      return expectedDue !== undefined && expectedDue !== due ? { changed: changedMessage, session: current } : { session: current };
    }
    return { session: current, message: 'This checkout changed meanwhile; check the total and pay again.' };
  }

  /** The tax of a buyer's location (`field` names the request's fields in a 400). */
  private async taxContext(orgId: string, input: { country: string; region?: string | null; taxId?: string | null }, field: string): Promise<TaxContext | null> {
    if (!this.tax) return null;
    return this.tax.contextFor(orgId, this.tax.parseLocation(input, field));
  }

  /** Whether Kassa's own card page may take the buyer's location (the sandbox; Stripe Checkout's page is Stripe's). */
  takesTaxLocation(session: CheckoutSession): boolean {
    return this.tax !== undefined && session.provider === 'STRIPE' && !this.hosted;
  }

  /** Whether the hosted page must ask the buyer's country before the payment: a card session on Kassa's page without a location, of an organization with active tax rates. */
  async needsTaxLocation(session: CheckoutSession): Promise<boolean> {
    if (session.tax || !this.takesTaxLocation(session)) return false;
    return this.tax!.hasActiveRates(session.orgId);
  }

  /** Whether a new session without the buyer's location takes Kassa's location step: on Stripe Checkout's rail, for an organization with rates. */
  private async asksLocationFirst(orgId: string, provider: CheckoutSession['provider']): Promise<boolean> {
    return provider === 'STRIPE' && this.hosted !== undefined && this.tax !== undefined && (await this.tax.hasActiveRates(orgId));
  }

  /** A Stripe-rail session whose location Kassa's page asks before Stripe Checkout opens (docs/tax.md). */
  takesLocationStep(session: CheckoutSession): boolean {
    return session.locationStep === true && this.hosted !== undefined && this.tax !== undefined && session.provider === 'STRIPE';
  }

  /**
   * Kassa's location step on the Stripe rail (issue 39, docs/tax.md "On Stripe: the buyer's
   * country on Kassa's page"): the buyer's country (region, tax id) gives the session its tax and
   * amount, and a Stripe Checkout Session is opened with fixed rates for them; the buyer goes on
   * there. The same location again (a double submit, "Continue" after coming back) gets the
   * session already opened for it. Another location: the open one is closed first (paid
   * meanwhile → `paid`, nothing changes), then a new one is opened, and the session moves to it
   * only while it is still on the one read (a conditional write): of two concurrent steps one
   * wins, the other closes the Checkout Session it opened. 400 (naming `customerTax.…`) for a bad
   * location, 409 when the session cannot take it (not payable, changed meanwhile).
   */
  async handOffWithLocation(
    session: CheckoutSession,
    input: { country: string; region?: string | null; taxId?: string | null },
  ): Promise<{ kind: 'opened'; session: CheckoutSession; url: string } | { kind: 'paid'; session: CheckoutSession } | { kind: 'discount_refused'; session: CheckoutSession; message: string }> {
    if (!this.takesLocationStep(session)) throw conflict('This checkout takes no location on this page');
    if (!this.isPayable(session)) throw conflict('This checkout can no longer be paid');
    const tax = (await this.taxContext(session.orgId, input, 'customerTax'))!;
    if (session.processorUrl && session.tax && sameLocation(session.tax.location, tax.location)) return { kind: 'opened', session, url: session.processorUrl };
    assertAmountBounds(session.provider, session.currency, priceWithTax(sessionChargeInputs(session), tax).total, 'The amount with tax');
    const amount = priceWithTax(sessionLineInputs(session), tax).total;
    const stores = this.uow.stores.sessions;
    const previous = session.processorSessionId;
    const discount = discountIds(session.pricing.discount);
    if (this.discounts) {
      // The redemption is the discount's this Checkout Session is opened with (issue 39): kept when it
      // is already (back and forth counts once), else the old one given back and this one claimed,
      // under the session's row lock and only while the session still has the discount read.
      let held: 'kept' | 'changed';
      try {
        held = await this.discounts.reclaim(session.orgId, session.id, session.pricing.discount ?? null, session.customerEmail ?? '');
      } catch (err) {
        if (!(err instanceof DiscountRefusal)) throw err;
        // Used up (or expired) since it was typed: taken off, the buyer sees the new total and continues again.
        const { discount: _, ...pricing } = session.pricing;
        const without = priceWithTax(sessionLineInputs({ quantity: session.quantity, pricing, product: session.product }), session.tax).total;
        const now = this.clock.now();
        if (session.processorUrl !== null || !(await stores.setStepDiscount(session.id, pricing, without, session.amount, previous, now))) throw conflict('This checkout changed meanwhile; check it and continue again');
        const current = { ...session, pricing, amount: without, updatedAt: now };
        return { kind: 'discount_refused', session: current, message: `${err.message} It was removed: the total is now ${formatMoney(current.amount, current.currency)}${current.tax ? '' : ' before tax'}.` };
      }
      if (held === 'changed') throw conflict('This checkout changed meanwhile; check it and continue again');
    }
    if (previous) {
      // The url goes first, so the `expired` event of the session closed here is not the Kassa session's.
      if (session.processorUrl !== null && !(await stores.markProcessorClosing(session.id, previous, this.clock.now()))) {
        throw conflict('This checkout changed meanwhile; check it and continue again');
      }
      if ((await this.hosted!.close(previous)) === 'completed') return { kind: 'paid', session };
    }
    const located = { ...session, tax, amount };
    const { country, region, taxId } = tax.location;
    const handOff = sha256Hex(JSON.stringify([previous, country, region, taxId, discount?.couponId ?? null, discount?.promotionCodeId ?? null])).slice(0, 24);
    const opened = await this.hosted!.open(located, handOff);
    const now = this.clock.now();
    const next = { tax, amount, processorSessionId: opened.processorSessionId, processorUrl: opened.url, expiresAt: opened.expiresAt };
    if (!(await stores.handOffWithLocation(session.id, previous, next, now, discount))) {
      const current = await stores.find(session.orgId, session.id);
      // The same step submitted twice at once: Stripe gave both the same Checkout Session.
      if (current?.processorSessionId === opened.processorSessionId && current.processorUrl) return { kind: 'opened', session: current, url: current.processorUrl };
      await this.hosted!.close(opened.processorSessionId).catch(() => undefined);
      throw conflict('This checkout changed meanwhile; check it and continue again');
    }
    const expiresAt = opened.expiresAt.getTime() > session.expiresAt.getTime() ? opened.expiresAt : session.expiresAt;
    return { kind: 'opened', session: { ...located, processorSessionId: opened.processorSessionId, processorUrl: opened.url, expiresAt, updatedAt: now }, url: opened.url };
  }

  /**
   * The buyer's location from the hosted page (sandbox card sessions): the session's tax and
   * amount, written while the session is payable and still at the amount read (a conditional
   * UPDATE). 400 naming the field for a bad country, region or tax id; 409 when not payable.
   */
  async setTaxLocation(session: CheckoutSession, input: { country: string; region?: string | null; taxId?: string | null }): Promise<CheckoutSession> {
    if (!this.takesTaxLocation(session)) throw conflict('This checkout cannot take a tax location on this page');
    if (!this.isPayable(session)) throw conflict('This checkout can no longer be paid');
    // Once the payment has started (a promotion code redeemed, the amount fixed for the charge) the total no longer changes.
    if (session.pricing.paymentStarted) throw conflict('The payment of this checkout has started; its total can no longer change');
    const tax = (await this.taxContext(session.orgId, input, 'customerTax'))!;
    // As at creation: the charges with tax are bounded; a discount may bring the total down to 0.
    assertAmountBounds(session.provider, session.currency, priceWithTax(sessionChargeInputs(session), tax).total, 'The amount with tax');
    const amount = priceWithTax(sessionLineInputs(session), tax).total;
    const now = this.clock.now();
    const written = await this.uow.stores.sessions.setTax(session.id, tax, amount, session.amount, now);
    if (!written) throw conflict('This checkout changed meanwhile; reload the page');
    return { ...session, tax, amount, updatedAt: now };
  }

  /** 400 for a price crypto checkout cannot take; 403 when the org has no usable receiving wallet. */
  private async prepareCrypto(orgId: string, pricing: PricingSnapshot, field: string): Promise<PreparedQuote> {
    if (!this.crypto) throw forbidden('Crypto checkout is not enabled on this deployment');
    this.crypto.checkPricing(pricing, field);
    return this.crypto.prepare(orgId, pricing.currency as 'USDC' | 'USDT');
  }

  /** The crypto payment instructions of a session (API `crypto`); undefined for card sessions. */
  async cryptoQuoteOf(session: CheckoutSession): Promise<QuoteView | undefined> {
    if (session.provider !== 'CRYPTO' || !this.crypto) return undefined;
    const quote = await this.crypto.quoteOf(session.id);
    return quote ? presentQuote(quote) : undefined;
  }

  private async resolvePurchase(
    orgId: string,
    body: CheckoutSessionCreate,
    provider: 'STRIPE' | 'CRYPTO',
  ): Promise<{ pricing: PricingSnapshot; product: ProductSnapshot }> {
    if (body.pricingId) {
      const found = await this.catalog.findPrice(orgId, body.pricingId);
      if (!found || !found.price.active) throw validationError(`body.pricingId ${body.pricingId} is not an active price of this organization`);
      const { price, product } = found;
      if (product.status === 'ARCHIVED') throw validationError(`body.pricingId ${price.id} belongs to an archived product`);
      if (price.provider !== provider) throw validationError(`body.pricingId ${price.id} is a ${price.provider} price; it cannot be sold on the ${provider} rail`);
      if (price.flexibleAmount) {
        throw validationError(`body.pricingId ${price.id} has a flexible amount; pass pricingData with the amount instead`);
      }
      return {
        pricing: {
          amount: price.amount,
          billingInterval: price.billingInterval,
          billingIntervalCount: price.billingIntervalCount,
          currency: price.currency,
          flexibleAmount: false,
          maxAmount: price.maxAmount,
          minAmount: price.minAmount,
          pricingId: price.id,
          pricingName: price.pricingName,
          pricingType: price.pricingType,
          ...(price.trialDays ? { trialDays: price.trialDays } : {}),
          ...(price.grantsUnits ? { grantsUnits: price.grantsUnits } : {}),
          // The usage charges the renewals bill in arrears, stated on the hosted page before paying (issue 38).
          ...(price.pricingType === 'SUBSCRIPTION' && price.meteredComponents.length > 0 ? { usage: await this.catalog.usageTermsOf(orgId, price) } : {}),
        },
        product: { productId: product.id, name: product.name, description: product.description ?? '' },
      };
    }
    const data = body.pricingData!;
    const currency = data.currency.toUpperCase();
    if (provider === 'STRIPE' && STABLECOINS.has(currency)) {
      throw validationError(`body.pricingData.currency ${currency} is a crypto currency; use provider CRYPTO or a fiat currency for card checkout`);
    }
    if (provider === 'STRIPE' && !isFiatCurrency(currency)) {
      throw validationError(`body.pricingData.currency ${currency} is not an ISO 4217 currency code`);
    }
    let product: ProductSnapshot;
    if (data.productId) {
      const found = await this.catalog.findProduct(orgId, data.productId);
      if (!found) throw validationError(`body.pricingData.productId ${data.productId} is not a product of this organization`);
      if (found.status === 'ARCHIVED') throw validationError(`body.pricingData.productId ${found.id} is archived`);
      product = { productId: found.id, name: found.name, description: found.description ?? '' };
    } else {
      const name = data.productData!.name.trim();
      // Characters are code points, as JSON Schema counts them (an emoji is one, not two).
      const characters = [...name].length;
      if (characters < 1 || characters > 255) {
        throw validationError(`body.pricingData.productData.name must be 1-255 characters after trimming surrounding whitespace (it has ${characters})`);
      }
      product = { productId: null, name, description: data.productData!.description ?? '' };
    }
    const subscription = data.pricingType === 'SUBSCRIPTION';
    if (data.trialDays !== undefined) assertTrialDays(subscription ? 'SUBSCRIPTION' : 'ONE_TIME', data.trialDays, 'body.pricingData.trialDays');
    return {
      pricing: {
        amount: data.amount,
        billingInterval: subscription ? (data.billingInterval ?? null) : null,
        billingIntervalCount: subscription ? (data.billingIntervalCount ?? 1) : 1,
        currency,
        flexibleAmount: false,
        maxAmount: null,
        minAmount: null,
        pricingId: null,
        pricingName: data.pricingName ?? product.name,
        pricingType: subscription ? 'SUBSCRIPTION' : 'ONE_TIME',
        ...(subscription && data.trialDays ? { trialDays: data.trialDays } : {}),
      },
      product,
    };
  }

  /** A session of the organization, moved to EXPIRED first when its expiry has passed. */
  async get(orgId: string, id: string): Promise<CheckoutSession> {
    const session = await this.uow.stores.sessions.find(orgId, id);
    if (!session) throw notFound('Checkout session');
    return this.expireIfDue(session);
  }

  /** The session (expired first when its time has passed) with the id and status of its order. */
  async getWithOrder(orgId: string, id: string): Promise<{ session: CheckoutSession; order: SessionOrder | null }> {
    const found = await this.uow.stores.sessions.findWithOrder(orgId, id);
    if (!found) throw notFound('Checkout session');
    // Expiry never makes or changes an order: the order read with the session still holds.
    // A session not due is answered without the async hop of expireIfDue (every read by id).
    if (!this.isDue(found.session)) return found;
    return { session: await this.expireIfDue(found.session), order: found.order };
  }

  private isDue(session: CheckoutSession): boolean {
    return session.status === 'CREATED' && session.expiresAt.getTime() <= this.clock.now().getTime();
  }

  private async expireIfDue(session: CheckoutSession): Promise<CheckoutSession> {
    if (!this.isDue(session)) return session;
    return this.uow.transaction(async (tx) => {
      const locked = (await tx.sessions.findForUpdate(session.id))!;
      if (locked.status !== 'CREATED') return locked;
      const expired = { ...locked, status: 'EXPIRED' as const, updatedAt: this.clock.now() };
      assertWritten(await tx.sessions.update(expired, 'CREATED'), 'checkout session');
      // Expired unpaid: its promotion code or coupon redemption is given back (issue 39), once, and
      // so is the customer's balance its payment start drew (RESTORED).
      await tx.redemptions.releaseUnpaid([expired.id], expired.updatedAt);
      await restoreUnpaidDraw(tx, expired, expired.updatedAt);
      return expired;
    });
  }

  /**
   * CREATED → EXPIRED; EXPIRED stays EXPIRED (success); COMPLETE and FAILED → 409. A session on
   * a hosted processor's checkout has that checkout closed first, so it cannot be paid afterwards.
   */
  async expire(orgId: string, id: string): Promise<CheckoutSession> {
    const before = await this.uow.stores.sessions.find(orgId, id);
    if (before?.status === 'CREATED' && before.processorSessionId && this.hosted) {
      if ((await this.hosted.close(before.processorSessionId)) === 'completed') {
        throw conflict('The buyer has just paid this checkout; it can no longer be expired');
      }
    }
    return this.uow.transaction(async (tx) => {
      const found = await tx.sessions.find(orgId, id);
      if (!found) throw notFound('Checkout session');
      const session = (await tx.sessions.findForUpdate(found.id))!;
      if (session.status === 'EXPIRED') return session;
      if (session.status !== 'CREATED') throw conflict(`A ${session.status} checkout session cannot be expired`);
      const expired = { ...session, status: 'EXPIRED' as const, updatedAt: this.clock.now() };
      assertWritten(await tx.sessions.update(expired, 'CREATED'), 'checkout session');
      await tx.redemptions.releaseUnpaid([expired.id], expired.updatedAt);
      await restoreUnpaidDraw(tx, expired, expired.updatedAt);
      return expired;
    });
  }

  /**
   * Worker pass: sessions whose expiry has passed become EXPIRED even if nobody reads them, and
   * their redemptions are given back in the same transaction (the rows stay locked until it ends).
   */
  expireDue(limit = 500): Promise<number> {
    const now = this.clock.now();
    return this.uow.transaction(async (tx) => {
      const expired = await tx.sessions.expireDue(now, limit);
      await tx.redemptions.releaseUnpaid(expired.map((e) => e.id), now);
      // The balances their payment start drew (issue 39): given back, RESTORED (no order: they were CREATED).
      for (const e of expired) if (e.drawOrderId) await tx.balances.restore(e.drawOrderId, now);
      return expired.length;
    });
  }

  orderOf(session: CheckoutSession): Promise<Order | undefined> {
    return this.uow.stores.orders.findBySession(session.id);
  }

  // ---- hosted page ----

  async findByPageToken(token: string): Promise<CheckoutSession | undefined> {
    const session = await this.uow.stores.sessions.findByPageToken(token);
    return session ? this.expireIfDue(session) : undefined;
  }

  /**
   * Whether a session draws its customer's credit balance when its payment starts (issue 39,
   * docs/plan-changes.md "A new checkout draws it"): a card session on Kassa's own page (the
   * sandbox; on Stripe, Stripe applies its own balance), that **named its customer** at creation
   * (a balance is never shown to whoever types an e-mail address), for a subscription without a
   * free trial (a trial's first charge is a renewal, which draws it then).
   */
  drawsBalance(session: CheckoutSession): boolean {
    return (
      !this.hosted &&
      session.provider === 'STRIPE' &&
      session.customerNamed &&
      session.customerId !== null &&
      session.pricing.pricingType === 'SUBSCRIPTION' &&
      session.pricing.billingInterval !== null &&
      !trialOf(session, this.clock.now())
    );
  }

  /**
   * What the hosted page shows of the customer's balance before the buyer confirms: the draw
   * reserved when the payment started (kept across declined attempts), else min(balance, total) as
   * the balance reads now (unlocked: the payment's start reads it again under its lock and refuses
   * a due that moved). `due`: what the card is charged.
   */
  async balanceQuote(session: CheckoutSession): Promise<{ applied: number; due: number }> {
    const reserved = session.pricing.balance?.amountCents;
    if (reserved !== undefined) return { applied: reserved, due: session.amount - reserved };
    if (session.pricing.paymentStarted || !this.drawsBalance(session) || session.amount <= 0) return { applied: 0, due: session.amount };
    const balance = await this.uow.stores.balances.balance(session.orgId, session.customerId!, session.currency);
    const applied = Math.min(Math.max(balance, 0), session.amount);
    return { applied, due: session.amount - applied };
  }

  /**
   * The Pay button. Declines leave the session payable with `lastError` recorded. `expectedDue`:
   * the amount due the page showed (the hosted form sends it); a due that moved since (the
   * customer's balance changed) is `changed`, nothing charged.
   */
  async pay(token: string, input: { email?: string; card?: CardDetails; expectedDue?: number }): Promise<PaymentAttempt> {
    let session = await this.findByPageToken(token);
    if (!session) throw notFound('Checkout session');
    // A crypto session is paid by an on-chain transfer, never by a card posted to its page.
    if (session.provider === 'CRYPTO') throw validationError('This checkout is paid with crypto: send the transfer shown on the checkout page');
    // Card data never reaches Kassa when the processor has its own checkout page.
    if (session.processorUrl || this.hosted) throw validationError("This checkout is paid on the card processor's page, not with a card posted here");
    if (!this.isPayable(session)) return { kind: 'not_payable', session };
    const email = session.customerEmail ?? input.email?.trim();
    if (!email || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) || Buffer.byteLength(email) > 255) {
      return { kind: 'declined', session, message: 'Enter a valid e-mail address.' };
    }
    const started = await this.startPayment(session, email, input.expectedDue);
    if ('changed' in started) return { kind: 'changed', session: started.session, message: started.changed };
    if ('message' in started) return { kind: 'declined', session: started.session, message: started.message };
    session = started.session;
    // The rest after the customer's balance drawn at the payment's start (issue 39).
    const due = session.amount - (session.pricing.balance?.amountCents ?? 0);
    // A free trial charges nothing now: the card is checked and saved (amount 0), or — when the
    // session lets the trial start without one — not asked for at all (issue 39).
    const trial = trialOf(session, this.clock.now());
    if (!input.card) {
      if (!trial || session.pricing.trialPaymentMethodCollection !== 'IF_REQUIRED') return { kind: 'declined', session, message: 'Enter your card details.' };
      const { order } = await this.payments.applyPaymentResult({ checkoutSessionId: session.id, outcome: 'succeeded', processorPaymentId: `trial_${session.id}`, customerEmail: email });
      return { kind: 'paid', session: (await this.findByPageToken(token))!, order };
    }
    // Covered whole by the balance: the card is checked for 0 and saved for the renewals (as a trial's).
    const result = await this.processor.charge({ orgId: session.orgId, checkoutSessionId: session.id, amount: trial ? 0 : due, currency: session.currency, card: input.card });
    if (result.status === 'declined') {
      const failure = { code: result.code, occurredAt: this.clock.now().toISOString(), operation: 'charge', requestId: result.requestId };
      // Written only while the session is still open: a concurrent attempt may have paid it meanwhile.
      if (!(await this.uow.stores.sessions.recordAttemptFailure(session.id, failure, this.clock.now()))) {
        const current = (await this.findByPageToken(token))!;
        return this.isPayable(current) ? { kind: 'declined', session: current, message: result.message } : { kind: 'not_payable', session: current };
      }
      return { kind: 'declined', session: { ...session, lastError: failure, updatedAt: this.clock.now() }, message: result.message };
    }
    if (result.status === 'already_accepted') {
      return { kind: 'processing', session: (await this.findByPageToken(token))! };
    }
    // A check of 0 (the balance pays it all) moves no money: the order is paid at once.
    const coveredWhole = !trial && due === 0 && session.pricing.balance !== undefined;
    const { order } = await this.payments.applyPaymentResult({
      checkoutSessionId: session.id,
      outcome: result.status === 'succeeded' || coveredWhole ? 'succeeded' : 'pending',
      processorPaymentId: result.paymentId,
      paymentMethod: result.paymentMethod,
      customerEmail: email,
    });
    const updated = (await this.findByPageToken(token))!;
    return { kind: order.status === 'PAID' ? 'paid' : 'pending', session: updated, order };
  }

  /**
   * Opens a checkout for a payment link. Query parameters become the attempt's `metadata` (same
   * limits as the API's); `merchant_reference` / `merchantReference` is also promoted to
   * `merchantReference` and stays in metadata. They are untrusted: they never change the price.
   */
  /** The organization a payment link belongs to (its error pages show whose link it is). */
  async paymentLinkOrgId(linkToken: string): Promise<string | undefined> {
    return (await this.catalog.findPaymentLinkByToken(linkToken))?.link.orgId;
  }

  async startFromPaymentLink(linkToken: string, query: Record<string, unknown>): Promise<CheckoutSession> {
    const found = await this.catalog.findPaymentLinkByToken(linkToken);
    if (!found) throw notFound('Payment link');
    const { link, price, product } = found;
    if (!link.isActive || !price.active || product.status === 'ARCHIVED') throw new AppError('NOT_FOUND', 'This payment link is no longer active');
    const metadata: Record<string, string> = {};
    for (const [key, raw] of Object.entries(query)) {
      if (typeof raw !== 'string') throw validationError(`Query parameter "${key}" must appear once with a plain value`);
      if (key.length < 1 || key.length > METADATA_LIMITS.keyLength || /[[\]]/.test(key)) throw validationError(`Query parameter name "${key}" is not allowed (1-40 characters, no [ or ])`);
      if (raw.length > METADATA_LIMITS.valueLength) throw validationError(`Query parameter "${key}" is longer than ${METADATA_LIMITS.valueLength} characters`);
      metadata[key] = raw;
    }
    if (Object.keys(metadata).length > METADATA_LIMITS.pairs) throw validationError(`At most ${METADATA_LIMITS.pairs} query parameters are kept`);
    const merchantReference = metadata.merchant_reference ?? metadata.merchantReference ?? null;
    if (merchantReference !== null && Buffer.byteLength(merchantReference) > MAX_REFERENCE_BYTES) {
      throw validationError(`merchant_reference must be at most ${MAX_REFERENCE_BYTES} bytes`);
    }
    const linkOrg = await this.orgs.getOrganization(link.orgId);
    const refusal = price.provider === 'CRYPTO' ? OrgService.checkoutRefusal(linkOrg) : OrgService.cardCheckoutRefusal(linkOrg);
    if (refusal) throw refusal;
    if (price.flexibleAmount) throw new AppError('NOT_IMPLEMENTED', 'Flexible-amount payment links are not available in this build yet');
    // A price stored before the rail's bounds were enforced is never charged.
    assertAmountBounds(price.provider, price.currency, price.amount, "This payment link's price");
    const now = this.clock.now();
    const session: CheckoutSession = {
      id: newId('CS'),
      orgId: link.orgId,
      status: 'CREATED',
      provider: price.provider,
      amount: price.amount,
      currency: price.currency,
      quantity: 1,
      pricing: {
        amount: price.amount,
        billingInterval: price.billingInterval,
        billingIntervalCount: price.billingIntervalCount,
        currency: price.currency,
        flexibleAmount: price.flexibleAmount,
        maxAmount: price.maxAmount,
        minAmount: price.minAmount,
        pricingId: price.id,
        pricingName: price.pricingName,
        pricingType: price.pricingType,
        ...(price.trialDays ? { trialDays: price.trialDays, trialPaymentMethodCollection: 'ALWAYS' as const } : {}),
        ...(price.grantsUnits ? { grantsUnits: price.grantsUnits } : {}),
      },
      product: { productId: product.id, name: product.name, description: product.description ?? '' },
      customerId: null,
      customerEmail: null,
      customerNamed: false,
      merchantReference,
      metadata: Object.keys(metadata).length > 0 ? metadata : null,
      successUrl: null,
      cancelUrl: null,
      paymentLinkId: link.id,
      pageToken: randomToken(32),
      lastError: null,
      processorSessionId: null,
      processorUrl: null,
      processorAccountId: this.connectedAccountOf(linkOrg, price.provider),
      expiresAt: new Date(now.getTime() + DEFAULT_EXPIRES_IN * 1000),
      createdAt: now,
      updatedAt: now,
    };
    const crypto = session.provider === 'CRYPTO' ? await this.prepareCrypto(link.orgId, session.pricing, "The payment link's price") : undefined;
    // A link never knows the buyer's location: on Stripe, with rates, Kassa's step asks it before
    // Stripe's page opens (as for a session created without customerTax).
    session.locationStep = await this.asksLocationFirst(link.orgId, session.provider);
    const opened = this.hosted && session.provider === 'STRIPE' && !session.locationStep ? await this.openHosted(session) : session;
    await this.uow.transaction(async (tx) => {
      await tx.sessions.insert(opened);
      if (crypto) await this.crypto!.store(tx, session, crypto);
    });
    return opened;
  }
}

/**
 * The session's trial (issue 39): the price's `trialDays` unless the body overrides it (0: none),
 * with how the card is collected. A trial on a purchase that is not a subscription is 400 (crypto
 * prices are ONE_TIME only, so crypto never has one); so is `IF_REQUIRED` without a trial.
 */
function withTrial(pricing: PricingSnapshot, body: CheckoutSessionCreate): PricingSnapshot {
  const { trialDays: priceDays, trialPaymentMethodCollection: _, ...base } = pricing;
  if (body.trialDays !== undefined && body.trialDays !== 0) assertTrialDays(pricing.pricingType, body.trialDays, 'body.trialDays');
  const days = body.trialDays ?? priceDays ?? 0;
  const collection = body.trialPaymentMethodCollection ?? 'ALWAYS';
  if (days === 0) {
    if (collection !== 'ALWAYS') throw validationError('body.trialPaymentMethodCollection IF_REQUIRED needs a free trial (trialDays)');
    return base;
  }
  return { ...base, trialDays: days, trialPaymentMethodCollection: collection };
}

/** The ids a conditional write compares a session's discount by (null: none). */
function discountIds(discount: PricingSnapshot['discount']): DiscountIds | null {
  return discount ? { couponId: discount.couponId, promotionCodeId: discount.promotionCodeId ?? null } : null;
}

/** Whether two discounts are the same coupon through the same code (or both none). */
function sameDiscount(a: PricingSnapshot['discount'], b: PricingSnapshot['discount']): boolean {
  const x = discountIds(a);
  const y = discountIds(b);
  return x === null || y === null ? x === y : x.couponId === y.couponId && x.promotionCodeId === y.promotionCodeId;
}

/** Whether two locations are the same place and tax id (the location step's "same again"). */
function sameLocation(a: TaxContext['location'], b: TaxContext['location']): boolean {
  return a.country === b.country && (a.region ?? null) === (b.region ?? null) && (a.taxId ?? null) === (b.taxId ?? null);
}
