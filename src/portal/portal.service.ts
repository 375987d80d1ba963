/**
 * The customer portal: a buyer's own view of one merchant — their orders with receipts, their
 * subscriptions (cancel at period end after a confirmation, undo it, cancel now where the merchant
 * allowed it) and the products they are entitled to — without an account.
 *
 * Entry is a short-lived, single-use link, exchanged once for a portal session (an HttpOnly cookie)
 * bound to one customer of one organization:
 *  - the merchant's server asks for it (`POST /v1/customer-portal-sessions`): link valid
 *    LINK_TTL_MS (10 minutes), meant to be followed at once (a redirect);
 *  - the buyer asks for it on the portal's sign-in page: the link is e-mailed to the customer's
 *    address (valid EMAIL_LINK_TTL_MS, 30 minutes), and only when SMTP is configured;
 *  - the paid checkout's page opens a session directly (a POST from that page, for
 *    CHECKOUT_ENTRY_MS, 1 hour, after the payment): the checkout URL never becomes a portal key.
 * A portal session lasts SESSION_TTL_MS (1 hour) from entry and is not extended. Both tokens are
 * 32 random base62 characters, stored only as SHA-256 hashes, never logged.
 */
import type { Clock } from '../kernel/clock.js';
import { conflict, forbidden, notFound, validationError } from '../kernel/errors.js';
import { newId, randomToken } from '../kernel/ids.js';
import { sha256Hex, constantTimeEqual } from '../kernel/secrets.js';
import type { CommerceUnitOfWork } from '../commerce/stores.js';
import type { CheckoutSession, Customer, Order, Subscription } from '../commerce/model.js';
import type { UsageEstimate } from '../commerce/usage-estimate.js';
import { renewalOrder } from '../commerce/renewal-order.js';
import { lastDiscountedPeriod } from '../commerce/discounts.js';
import type { PortalOrigin, PortalSession, PortalSessionRepository } from './portal.repository.js';
import type { PlanChangeQuote, PlanChangeRequest, PlanChangeScope } from '../commerce/plan-change.js';

export const LINK_TTL_MS = 10 * 60_000;
export const EMAIL_LINK_TTL_MS = 30 * 60_000;
export const SESSION_TTL_MS = 60 * 60_000;
export const CHECKOUT_ENTRY_MS = 60 * 60_000;
/** Sign-in e-mails per recipient (customer) per SIGN_IN_EMAIL_WINDOW_MS: a bound on mail sent to one mailbox (issue 37 §15). */
export const SIGN_IN_EMAILS_PER_WINDOW = 5;
export const SIGN_IN_EMAIL_WINDOW_MS = 60 * 60_000;

/** What the portal needs of the subscriptions domain. */
export interface PortalSubscriptions {
  listOfCustomer(orgId: string, customerId: string): Promise<Subscription[]>;
  cancel(id: string, options: { atPeriodEnd: boolean }, owner: { orgId: string; customerId: string }): Promise<Subscription>;
  keepRenewing(id: string, owner: { orgId: string; customerId: string }): Promise<Subscription>;
  /** The customer's metered subscriptions with their usage this period and estimated next charge. */
  usageThisPeriod(orgId: string, customerRef: string): Promise<{ customerId: string; estimates: UsageEstimate[] }>;
  previewChange(id: string, request: PlanChangeRequest, owner: { orgId: string; customerId: string }, scope?: PlanChangeScope): Promise<PlanChangeQuote>;
  changePlan(id: string, request: PlanChangeRequest, owner: { orgId: string; customerId: string }, scope?: PlanChangeScope): Promise<{ subscription: Subscription; quote: PlanChangeQuote; pending: boolean }>;
}

/** The products a customer may use (the entitlement check). */
export interface PortalEntitlements {
  check(orgId: string, query: { customerId: string }): Promise<{ products: Array<{ productId: string; productName: string; type: string }> }>;
}

/** Sends the sign-in link (src/buyer-emails); absent when no SMTP server is configured. */
export interface PortalSignInMailer {
  sendSignInLink(input: { orgId: string; to: string; url: string; expiresAt: Date }): Promise<void>;
}

/**
 * The audit log (src/accounts AuditLog): every subscription change made in the portal is recorded
 * with the session's creator as the actor (the key or member whose authority opened it) and the
 * buyer; a session the buyer opened alone (e-mailed link, paid checkout page) has the buyer
 * (`customer`, `CUS_…`) as the actor.
 */
export interface PortalAudit {
  /** Never rejects: a failed write is logged, the change it records is already made. */
  record(entry: {
    orgId: string;
    actor: { type: 'api_key'; id: string } | { type: 'user'; id: string } | { type: 'customer'; id: string };
    action: string;
    target: { type: string; id: string };
    summary: string;
    clientAddress: string | null;
  }): Promise<void>;
}

/** Who opened a merchant's portal session: the API key, or the member signed in to the console. */
export interface PortalCreator {
  actor: { type: 'api_key'; id: string } | { type: 'user'; id: string };
  /** The caller's permissions: the session may change subscriptions only with `subscriptions:manage`. */
  permissions: readonly string[];
}

/** The portal's subscription changes, as audit actions. */
export type PortalChange = 'cancel_at_period_end' | 'cancel_now' | 'keep' | 'plan_change';
const CHANGE_SAID: Record<PortalChange, string> = { cancel_at_period_end: 'canceled it at period end', cancel_now: 'canceled it now', keep: 'kept it renewing', plan_change: 'changed its plan or seats' };
const ORIGIN_SAID: Record<PortalOrigin, string> = { api: 'the merchant API', checkout: 'the buyer (paid checkout page)', email: 'the buyer (e-mailed sign-in link)' };

export interface PortalOverview {
  customer: Customer;
  orders: Order[];
  subscriptions: Subscription[];
  products: Array<{ productId: string; productName: string; type: string }>;
  /** Usage this period and the estimated next charge of the shown metered subscriptions. */
  usage: UsageEstimate[];
  /**
   * Per subscription in its free trial (not ending): the first charge at the trial's end, priced
   * as the renewal will price it (seats × unit, the checkout's coupon while it covers period 1,
   * the first order's tax); a metered price's usage comes on top (the usage estimate shows it).
   */
  firstCharges: Record<string, number>;
  /**
   * The customer's credit balance in each currency where it is above 0 (immediate downgrades'
   * credit, merchant credits; Stripe's customer balance for Stripe-billed subscriptions); none in a
   * checkout-scoped session, which shows one purchase only.
   */
  creditBalances: Array<{ currency: string; amountCents: number }>;
}

interface PortalScope {
  orderId: string;
  subscriptionId: string | null;
}

/** Whether a checkout-scoped session shows an order: the checkout's own, or a renewal of its subscription. */
const inScope = (scope: PortalScope | undefined, order: Pick<Order, 'id' | 'subscriptionId'>): boolean =>
  !scope || order.id === scope.orderId || (scope.subscriptionId !== null && order.subscriptionId === scope.subscriptionId);

export interface CreatedPortalLink {
  id: string;
  customerId: string;
  url: string;
  expiresAt: Date;
  returnUrl: string | null;
}

export class PortalService {
  private readonly baseUrl: string;

  constructor(
    private readonly repo: PortalSessionRepository,
    private readonly uow: CommerceUnitOfWork,
    private readonly subscriptions: PortalSubscriptions,
    private readonly entitlements: PortalEntitlements,
    private readonly clock: Clock,
    publicBaseUrl: string,
    /** A getter: the e-mail module is composed after this one. */
    private readonly mailerOf: () => PortalSignInMailer | undefined = () => undefined,
    /** A getter: the accounts module (the audit log) is composed after this one. */
    private readonly auditOf: () => PortalAudit | undefined = () => undefined,
  ) {
    this.baseUrl = publicBaseUrl.replace(/\/+$/, '');
  }

  /** Whether the sign-in page can e-mail links (SMTP configured). */
  get canEmailLinks(): boolean {
    return this.mailerOf() !== undefined;
  }

  /** The portal's sign-in page of an organization: what e-mails and the manage page link to (no token in it). */
  signInUrl(orgId: string): string {
    return `${this.baseUrl}/portal/o/${orgId}`;
  }

  private async newLink(
    customer: Customer,
    origin: PortalOrigin,
    ttlMs: number,
    options: { returnUrl?: string | null; allowCancelNow?: boolean; scopeOrderId?: string; canChangeSubscriptions?: boolean; createdBy?: string; planChangePriceIds?: string[]; allowQuantityChange?: boolean },
  ): Promise<CreatedPortalLink & { token: string }> {
    const now = this.clock.now();
    const token = randomToken(32);
    const session: PortalSession = {
      id: newId('CPS'),
      orgId: customer.orgId,
      customerId: customer.id,
      origin,
      returnUrl: options.returnUrl ?? null,
      allowCancelNow: options.allowCancelNow ?? false,
      scopeOrderId: options.scopeOrderId ?? null,
      canChangeSubscriptions: options.canChangeSubscriptions ?? true,
      createdBy: options.createdBy ?? null,
      planChangePriceIds: options.planChangePriceIds ?? null,
      allowQuantityChange: options.allowQuantityChange ?? false,
      linkExpiresAt: new Date(now.getTime() + ttlMs),
      enteredAt: null,
      sessionExpiresAt: null,
      createdAt: now,
    };
    await this.repo.insert(session, sha256Hex(token));
    return { id: session.id, customerId: customer.id, url: `${this.baseUrl}/portal/enter/${token}`, expiresAt: session.linkExpiresAt, returnUrl: session.returnUrl, token };
  }

  /**
   * The merchant API: a link for one customer (by id or e-mail) of the caller's organization. The
   * session may cancel and keep subscriptions only when the caller holds `subscriptions:manage`
   * (issue 37 §6); `allowCancelNow` without it is refused (403), never quietly dropped.
   */
  async createForMerchant(
    orgId: string,
    input: { customerId?: string; customerEmail?: string; externalId?: string; returnUrl?: string; allowCancelNow?: boolean; planChangePriceIds?: string[]; allowQuantityChange?: boolean },
    creator: PortalCreator,
  ): Promise<CreatedPortalLink> {
    const named = [input.customerId, input.customerEmail, input.externalId].filter((v) => v !== undefined).length;
    if (named !== 1) throw validationError('Give exactly one of customerId, customerEmail and externalId');
    const canChangeSubscriptions = creator.permissions.includes('subscriptions:manage');
    if (input.allowCancelNow && !canChangeSubscriptions) {
      throw forbidden('allowCancelNow needs the permission "subscriptions:manage": this caller may open a portal that shows orders and subscriptions, not one that cancels them');
    }
    if ((input.planChangePriceIds?.length || input.allowQuantityChange) && !canChangeSubscriptions) {
      throw forbidden('planChangePriceIds and allowQuantityChange need the permission "subscriptions:manage": this caller may open a portal that shows subscriptions, not one that changes them');
    }
    const customers = this.uow.stores.customers;
    const customer =
      input.customerId !== undefined
        ? await customers.find(orgId, input.customerId)
        : input.externalId !== undefined
          ? await customers.findByExternalId(orgId, input.externalId)
          : await customers.findByEmail(orgId, input.customerEmail!);
    if (!customer) throw notFound('Customer');
    const createdBy = creator.actor.type === 'api_key' ? `key:${creator.actor.id}` : `user:${creator.actor.id}`;
    const { token: _token, ...link } = await this.newLink(customer, 'api', LINK_TTL_MS, { ...input, canChangeSubscriptions, createdBy });
    return link;
  }

  /**
   * The buyer's "e-mail me a link" on the sign-in page. The answer never says whether the address
   * is a customer (the page shows the same text either way); a link goes out only to a customer's
   * own address, only when SMTP is configured.
   */
  async requestSignInLink(orgId: string, email: string): Promise<void> {
    const mailer = this.mailerOf();
    if (!mailer) throw conflict('This merchant cannot e-mail sign-in links; ask the merchant for a link to your account');
    const customer = await this.uow.stores.customers.findByEmail(orgId, email);
    if (!customer) return;
    // Beyond the bound nothing is sent, and the requester gets the same answer (no oracle, no mail bomb).
    const since = new Date(this.clock.now().getTime() - SIGN_IN_EMAIL_WINDOW_MS);
    if ((await this.repo.countLinksSince(orgId, customer.id, 'email', since)) >= SIGN_IN_EMAILS_PER_WINDOW) return;
    const link = await this.newLink(customer, 'email', EMAIL_LINK_TTL_MS, {});
    // Not awaited: the page answers as fast for a customer as for an unknown address (the mailer never rejects).
    void mailer.sendSignInLink({ orgId, to: customer.email, url: link.url, expiresAt: link.expiresAt });
  }

  /**
   * The paid checkout page's "open your account": a session at once, for an hour after the payment.
   * It shows this checkout's order (and its subscription) only, unless the merchant named the
   * customer when creating the checkout: an address typed on a checkout page (a payment link, Stripe
   * Checkout, the crypto e-mail step) proves nothing about its mailbox, so it never opens an existing
   * customer's history; the e-mailed sign-in link does (issue 37 §2).
   */
  async enterFromCheckout(session: CheckoutSession, order: Order | undefined): Promise<{ cookieToken: string; session: PortalSession } | undefined> {
    if (!order || order.status !== 'PAID') return undefined;
    if (!this.checkoutEntryOpen(order)) return undefined;
    const customer = await this.uow.stores.customers.find(session.orgId, order.customerId);
    if (!customer) return undefined;
    const scopeOrderId = session.customerNamed ? undefined : order.id;
    const link = await this.newLink(customer, 'checkout', LINK_TTL_MS, { returnUrl: session.successUrl, scopeOrderId });
    return this.enter(link.token);
  }

  /** Whether a checkout page may still offer "open your account". */
  checkoutEntryOpen(order: Pick<Order, 'status' | 'createdAt'> | undefined): boolean {
    // From the order's creation (the payment), so a later change to the order (a partial refund) never reopens it.
    return order?.status === 'PAID' && this.clock.now().getTime() - order.createdAt.getTime() <= CHECKOUT_ENTRY_MS;
  }

  /** The session an entry link would open (unused, unexpired), for its "continue" page. */
  findEnterable(linkToken: string): Promise<PortalSession | undefined> {
    return this.repo.findEnterable(sha256Hex(linkToken), this.clock.now());
  }

  /** Uses an entry link once: the new session's cookie token, or undefined (used, expired, unknown). */
  async enter(linkToken: string): Promise<{ cookieToken: string; session: PortalSession } | undefined> {
    const now = this.clock.now();
    const cookieToken = randomToken(32);
    const session = await this.repo.enter(sha256Hex(linkToken), sha256Hex(cookieToken), new Date(now.getTime() + SESSION_TTL_MS), now);
    return session && { cookieToken, session };
  }

  authenticate(cookieToken: string | undefined): Promise<PortalSession | undefined> {
    if (!cookieToken || !/^[0-9A-Za-z]{32}$/.test(cookieToken)) return Promise.resolve(undefined);
    return this.repo.findBySessionToken(sha256Hex(cookieToken), this.clock.now());
  }

  async signOut(cookieToken: string): Promise<void> {
    await this.repo.end(sha256Hex(cookieToken), this.clock.now());
  }

  /** The forms' anti-forgery token: derived from the session's cookie token, so never stored. */
  csrfToken(cookieToken: string): string {
    return sha256Hex(`kassa-portal-form:${cookieToken}`);
  }

  csrfValid(cookieToken: string, sent: string | undefined): boolean {
    return typeof sent === 'string' && constantTimeEqual(sent, this.csrfToken(cookieToken));
  }

  async overview(session: PortalSession): Promise<PortalOverview> {
    const stores = this.uow.stores;
    const customer = await stores.customers.find(session.orgId, session.customerId);
    if (!customer) throw notFound('Customer');
    const [orders, subscriptions, access, usage, balances] = await Promise.all([
      stores.orders.list(session.orgId, { customerId: session.customerId }, { offset: 0, limit: 100 }),
      this.subscriptions.listOfCustomer(session.orgId, session.customerId),
      this.entitlements.check(session.orgId, { customerId: session.customerId }),
      this.subscriptions.usageThisPeriod(session.orgId, session.customerId),
      stores.balances.balancesOf(session.orgId, session.customerId),
    ]);
    // Stripe-billed subscriptions: Stripe's customer balance pays them, shown as Kassa mirrors it
    // (checkout makes one Stripe customer per subscription, so no credit is counted twice).
    const totals = new Map(balances.map((b) => [b.currency, b.amountCents]));
    for (const sub of subscriptions) {
      if (!sub.processorSubscriptionId) continue;
      const mirrored = (await stores.processorBalances.balanceOfSubscription(session.orgId, sub.id, sub.currency)) ?? 0;
      totals.set(sub.currency, (totals.get(sub.currency) ?? 0) + mirrored);
    }
    const creditBalances = [...totals].filter(([, amountCents]) => amountCents > 0).map(([currency, amountCents]) => ({ currency, amountCents }));
    const scope = await this.scopeOf(session);
    // Before, the portal said "first charge" of the stored amount (exclusive tax included, no
    // coupon): €47.60 for a trial whose first renewal charges €38.08 with a 20 % code.
    const firstCharges: Record<string, number> = {};
    for (const sub of subscriptions) {
      if (sub.status !== 'ACTIVE' || !sub.trialEnd || sub.periodNumber !== 0 || sub.cancelAtPeriodEnd) continue;
      const first = await renewalOrder(stores, sub, 1, false, { processorPaymentId: null, processorStatus: null }, this.clock.now());
      firstCharges[sub.id] = first.amountCents;
    }
    // An order that was never paid (an abandoned crypto quote, a declined renewal) is no purchase.
    const shown = orders.records.filter((o) => (o.status === 'PAID' || o.status === 'REFUNDED' || o.status === 'UNDERPAID') && inScope(scope, o));
    if (!scope) return { customer, orders: shown, subscriptions, products: access.products, usage: usage.estimates, creditBalances, firstCharges };
    const productIds = new Set(shown.map((o) => o.productId));
    return {
      customer,
      orders: shown,
      subscriptions: subscriptions.filter((sub) => sub.id === scope.subscriptionId),
      products: access.products.filter((p) => productIds.has(p.productId)),
      usage: usage.estimates.filter((e) => e.subscription.id === scope.subscriptionId),
      creditBalances: [],
      firstCharges,
    };
  }

  /** A checkout-scoped session's order and subscription; undefined for a session that sees the customer's whole history. */
  private async scopeOf(session: PortalSession): Promise<PortalScope | undefined> {
    if (session.scopeOrderId === null) return undefined;
    const order = await this.uow.stores.orders.find(session.orgId, session.scopeOrderId);
    return { orderId: session.scopeOrderId, subscriptionId: order?.subscriptionId ?? null };
  }

  /** One of the session's customer's orders within the session's scope (404 for anyone else's). */
  async order(session: PortalSession, orderId: string): Promise<Order> {
    const order = await this.uow.stores.orders.find(session.orgId, orderId);
    if (!order || order.customerId !== session.customerId || !inScope(await this.scopeOf(session), order)) throw notFound('Order');
    return order;
  }

  /**
   * Per order, the refunds that failed or were canceled after the buyer was told "your refund is on
   * its way": the portal says so (issue 37 §28). Orders without any are absent.
   */
  async failedRefunds(session: PortalSession, orders: Order[]): Promise<Map<string, number>> {
    const failed = new Map<string, number>();
    await Promise.all(
      orders.map(async (o) => {
        const cents = (await this.uow.stores.refunds.listForOrder(session.orgId, o.id)).filter((r) => r.status === 'failed' || r.status === 'canceled').reduce((sum, r) => sum + r.amountCents, 0);
        if (cents > 0) failed.set(o.id, cents);
      }),
    );
    return failed;
  }

  /** A subscription the session may see (404 otherwise) and, when `change`, may change (409 when a merchant's session may not). */
  private async ownSubscription(session: PortalSession, subscriptionId: string, change = false): Promise<void> {
    const scope = await this.scopeOf(session);
    if (scope && scope.subscriptionId !== subscriptionId) throw notFound('Subscription');
    if (change && !session.canChangeSubscriptions) throw conflict('Changing subscriptions is not offered here; ask the merchant');
  }

  async cancelAtPeriodEnd(session: PortalSession, subscriptionId: string, clientAddress: string | null = null): Promise<Subscription> {
    await this.ownSubscription(session, subscriptionId, true);
    const changed = await this.subscriptions.cancel(subscriptionId, { atPeriodEnd: true }, session);
    await this.audit(session, subscriptionId, 'cancel_at_period_end', clientAddress);
    return changed;
  }

  async cancelNow(session: PortalSession, subscriptionId: string, clientAddress: string | null = null): Promise<Subscription> {
    await this.ownSubscription(session, subscriptionId, true);
    if (!session.allowCancelNow) throw conflict('Cancelling at once is not offered here; cancel at the end of the period instead');
    const changed = await this.subscriptions.cancel(subscriptionId, { atPeriodEnd: false }, session);
    await this.audit(session, subscriptionId, 'cancel_now', clientAddress);
    return changed;
  }

  /** What the merchant lets this session's buyer change (issue 39); undefined: no plan change offered. */
  planScope(session: PortalSession): PlanChangeScope | undefined {
    if (!session.canChangeSubscriptions || (!session.planChangePriceIds?.length && !session.allowQuantityChange)) return undefined;
    return { priceIds: session.planChangePriceIds ?? [], allowQuantity: session.allowQuantityChange ?? false };
  }

  private scopeFor(session: PortalSession): PlanChangeScope {
    const scope = this.planScope(session);
    if (!scope) throw conflict('Changing the plan is not offered here; ask the merchant');
    return scope;
  }

  /** The choices the buyer is offered: each listed price the subscription could move to, quoted (ineligible ones are left out). */
  async planOptions(session: PortalSession, subscriptionId: string): Promise<PlanChangeQuote[]> {
    await this.ownSubscription(session, subscriptionId, true);
    const scope = this.scopeFor(session);
    const quotes: PlanChangeQuote[] = [];
    for (const priceId of scope.priceIds ?? []) {
      try {
        quotes.push(await this.subscriptions.previewChange(subscriptionId, { priceId }, session, scope));
      } catch {
        // Not a price this subscription can move to (another interval or currency, inactive, its own): not offered.
      }
    }
    return quotes;
  }

  async previewPlanChange(session: PortalSession, subscriptionId: string, request: PlanChangeRequest): Promise<PlanChangeQuote> {
    await this.ownSubscription(session, subscriptionId, true);
    return this.subscriptions.previewChange(subscriptionId, request, session, this.scopeFor(session));
  }

  /**
   * What the renewals charge after a previewed change (issue 39), priced by the renewal's own
   * function (renewalOrder: the new seats × unit, the checkout's coupon while it covers the period,
   * the first order's tax): `next` the first renewal after the change, `full` one without the
   * coupon, `discounted` how many renewals from the next one the coupon still covers (null: every one).
   * Before, the confirm page said the stored amount "at each renewal", ignoring the coupon.
   */
  async renewalsAfterChange(session: PortalSession, subscriptionId: string, q: PlanChangeQuote): Promise<{ next: number; full: number; discounted: number | null }> {
    const s = await this.subscription(session, subscriptionId);
    const stores = this.uow.stores;
    const changed: Subscription = { ...s, priceId: q.to.priceId, productId: q.to.productId, productName: q.to.productName, amountCents: q.nextRenewalAmount, quantity: q.to.quantity };
    const period = s.periodNumber + 1;
    const payment = { processorPaymentId: null, processorStatus: null };
    const now = this.clock.now();
    const next = (await renewalOrder(stores, changed, period, false, payment, now)).amountCents;
    const full = (await renewalOrder(stores, changed, period, false, payment, now, [], { discount: false })).amountCents;
    if (next === full) return { next, full, discounted: null };
    const initial = await stores.orders.find(s.orgId, s.initialOrderId);
    const sessionId = initial?.checkoutSessionId ?? s.checkoutSessionId;
    const checkout = sessionId ? await stores.sessions.find(s.orgId, sessionId) : undefined;
    const discount = checkout?.pricing.discount;
    const last = discount ? lastDiscountedPeriod(discount, checkout.pricing.trialDays ? 1 : 0) : null;
    return { next, full, discounted: last === null ? null : Math.max(1, last - period + 1) };
  }

  async changePlan(session: PortalSession, subscriptionId: string, request: PlanChangeRequest, clientAddress: string | null = null): Promise<{ subscription: Subscription; quote: PlanChangeQuote; pending: boolean }> {
    await this.ownSubscription(session, subscriptionId, true);
    const { subscription, quote, pending } = await this.subscriptions.changePlan(subscriptionId, request, session, this.scopeFor(session));
    await this.audit(session, subscriptionId, 'plan_change', clientAddress);
    return { subscription, quote, pending };
  }

  async keepRenewing(session: PortalSession, subscriptionId: string, clientAddress: string | null = null): Promise<Subscription> {
    await this.ownSubscription(session, subscriptionId, true);
    const changed = await this.subscriptions.keepRenewing(subscriptionId, session);
    await this.audit(session, subscriptionId, 'keep', clientAddress);
    return changed;
  }

  /**
   * The audit entry of a portal change (`portal.subscription.<change>`): the actor is the session's
   * creator when a key or member opened it, else the buyer; the summary names the session, its
   * creator and the buyer. Written after the change, like the API's audited operations; the port
   * never rejects (a failed write is logged where it is composed, not turned into a failed change).
   */
  private async audit(session: PortalSession, subscriptionId: string, change: PortalChange, clientAddress: string | null): Promise<void> {
    const audit = this.auditOf();
    if (!audit) return;
    const creator = /^(key|user):(.+)$/.exec(session.createdBy ?? '');
    const actor = creator ? { type: creator[1] === 'key' ? ('api_key' as const) : ('user' as const), id: creator[2]! } : { type: 'customer' as const, id: session.customerId };
    const openedBy = session.createdBy ?? ORIGIN_SAID[session.origin];
    await audit.record({
      orgId: session.orgId,
      actor,
      action: `portal.subscription.${change}`,
      target: { type: 'subscription', id: subscriptionId },
      summary: `customer ${session.customerId} ${CHANGE_SAID[change]} in customer portal session ${session.id} opened by ${openedBy}`,
      clientAddress,
    });
  }

  async subscription(session: PortalSession, subscriptionId: string): Promise<Subscription> {
    await this.ownSubscription(session, subscriptionId);
    const found = (await this.subscriptions.listOfCustomer(session.orgId, session.customerId)).find((s) => s.id === subscriptionId);
    if (!found) throw notFound('Subscription');
    return found;
  }

  /** Housekeeping: sessions whose link and session both expired a day ago. */
  deleteExpired(limit = 500): Promise<number> {
    return this.repo.deleteExpired(new Date(this.clock.now().getTime() - 24 * 3600_000), limit);
  }
}
