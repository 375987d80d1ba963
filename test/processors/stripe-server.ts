/**
 * A local Stripe-shaped HTTP server for tests: Kassa's Stripe SDK client is pointed at it
 * (STRIPE_API_BASE_URL). Every object it answers with is typed with the SDK's own types, so a
 * shape that drifts from Stripe's fails to compile. It keeps Checkout Sessions and PaymentIntents,
 * honours Idempotency-Key like Stripe (same key and parameters: the same answer replayed;
 * different parameters: a 400 idempotency_error), and has test hooks for what a buyer or Stripe
 * does on its side: pay, pay asynchronously, decline a card, let a session expire, refund in the
 * Dashboard, open and close disputes, fail, rate-limit or hang. Every change on Stripe's side
 * records the event Stripe would send (`log`), listed by `GET /v1/events` with Stripe's paging.
 * Subscription checkouts make Stripe Billing objects (Subscription, Invoice with its payments),
 * and Billing's side is driven by hooks: renew a period (invoice paid or failed), retry a failed
 * invoice, end a subscription at its period end or after dunning. Metered usage (issue 38): a
 * renewal can start as a draft (`renewDraft`: `invoice.created`, finalized `finalizeDue` after its
 * `automatically_finalizes_at` unless `auto_advance` was set false), which takes invoice items
 * (`POST /v1/invoiceitems` with `invoice`, only while it is a draft), is updated
 * (`POST /v1/invoices/:id`, `auto_advance`), listed (`GET /v1/invoices/:id/lines`) and finalized
 * (`POST /v1/invoices/:id/finalize`: open, then charged at once when `auto_advance`), and
 * `POST /v1/invoices` opens a draft of a subscription. Customer balances (issue 39): every invoice
 * it finalizes applies the customer's balance (`applyCustomerBalance`: a credit, below 0, lowers
 * `amount_due` to total − credit; a total below 0 is due 0 and its credit goes to the balance),
 * with `starting_balance` / `ending_balance` and an `applied_to_invoice` customer balance
 * transaction; voiding an invoice gives its move back (`unapplied_from_invoice`);
 * `GET /v1/customers/:id` (with `balance`) and `GET /v1/customers/:id/balance_transactions`.
 * For Stripe Connect it keeps
 * connected accounts, checks a Checkout Session's transfer destination against them, moves each
 * paid destination charge to its account as a transfer, and records the transfer reversals of
 * refunds made with `reverse_transfer`. Plan and seat changes (issue 39): `POST /v1/subscriptions/:id`
 * with `items` (the one item's `price_data` and/or `quantity`; `proration_behavior` `none` or
 * `always_invoice` at `proration_date`, `payment_behavior: error_if_incomplete`), see `updateItems`,
 * and `POST /v1/products`.
 * Coupons (issue 39): `POST /v1/coupons` (own id; a taken id
 * is `resource_already_exists`), `GET /v1/coupons/:id`, a Checkout Session's `discounts` (taken off
 * the line before tax: `total_details.amount_discount`, `amount_total`), and in subscription mode
 * the subscription's Discount (`start`, `end` = start + `duration_in_months` for `repeating`),
 * applied to every invoice created before its end (`once`: the first invoice only, the $0 trial
 * invoice included), with `discount_amounts`, `invoice.discounts` and `total_discount_amounts`.
 * Stripe's rounding as modelled: percent off of the line's amount, rounded half up to the minor unit;
 * amount off at most the line; tax on the discounted amount, per invoice line and per rate, each
 * rounded on its line to the nearest minor unit, half up (Stripe's support article on rounding:
 * nearest unit, 0.025 → 0.03, and its worked example taxing each line item then summing), a
 * credit line's tax negative; the invoice's `total_taxes` per rate is the sum of its lines'.
 * Proration items are not discountable (Stripe, "Prorations and discounts"): a discount the
 * subscription holds when the proration is made is reflected in their amounts (the discounted
 * period amount, prorated and rounded once per line), not in `discount_amounts` (classic mode).
 * A draft's invoice items
 * (`discountable`: true unless negative or sent false) share the invoice's discount with the
 * subscription line, spread as `discountAllocation` says (Stripe does not document its rounding of
 * the shares; two models), recomputed on every item added (`withDiscounts`).
 * Dynamic tax rates (issue 39): `line_items[0][dynamic_tax_rates]` with `billing_address_collection`,
 * as Stripe's "Use manual tax rates" guide documents them: each rate needs a country Stripe
 * supports for them (US, GB, AU, the EU; a US rate a state), `tax_rates` and `dynamic_tax_rates`
 * exclude each other, the session is created without tax, and when the buyer completes it with an
 * address (`complete(…, { address })`) Stripe applies the rate matching the address's country
 * (and state, for a rate with one), or none. The session's `total_details.breakdown` (returned
 * only when expanded, as Stripe does) lists the taxes by rate; a subscription's item takes the
 * chosen rate as its `tax_rates`, which its invoices apply instead of the subscription's
 * `default_tax_rates`. `dynamicTaxRatesAvailable = false` answers as Stripe answers an account
 * without the parameter (stripe-node 22.4.0 dropped it as "limited-use"): 400 unknown parameter.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Request, type Response } from 'express';
import Stripe from 'stripe';

type CheckoutEventType = Extract<Stripe.Event, { data: { object: Stripe.Checkout.Session } }>['type'];
type InvoiceEventType = 'invoice.paid' | 'invoice.payment_failed';
type SubscriptionEventType = 'customer.subscription.updated' | 'customer.subscription.deleted';

export interface StripeRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  body: Record<string, unknown>;
  query?: Record<string, unknown>;
}

/**
 * What the next calls do instead of answering: `error500` (Stripe's api_error), `hang` (no answer),
 * `answerThenHang` (the call takes effect, the answer never leaves: a timeout after Stripe acted),
 * `unauthorized` (Stripe refuses the key), `rateLimit:<seconds>` (429 with that Retry-After).
 */
export type Failure = 'error500' | 'hang' | 'answerThenHang' | 'unauthorized' | `rateLimit:${number}` | `delay:${number}`;

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

export class FakeStripe {
  readonly sessions = new Map<string, Stripe.Checkout.Session>();
  readonly intents = new Map<string, Stripe.PaymentIntent>();
  readonly refunds = new Map<string, Stripe.Refund>();
  /** Connected accounts of the platform (Stripe Connect). */
  readonly accounts = new Map<string, Stripe.Account>();
  /** The destination a Checkout Session's payment is transferred to (its `payment_intent_data[transfer_data]`). */
  readonly destinations = new Map<string, string>();
  /** Transfers of paid destination charges, by PaymentIntent, and the reversals refunds made of them. */
  readonly transfers = new Map<string, { destination: string; amount: number; reversed: number }>();
  readonly subscriptions = new Map<string, Stripe.Subscription>();
  /** Products (`POST /v1/products`, and those Checkout made inline for a subscription's price_data). */
  readonly products = new Map<string, Stripe.Product>();
  /** Prices: those made inline (`price_data`, archived: `active: false`, as Stripe makes them) and `POST /v1/prices` (active). */
  readonly prices = new Map<string, Stripe.Price>();
  readonly invoices = new Map<string, Stripe.Invoice>();
  readonly invoiceItems = new Map<string, Stripe.InvoiceItem>();
  /** Customers' balances in Stripe's sign (below 0: credit the customer's next invoices draw), by customer id. */
  readonly customerBalances = new Map<string, number>();
  /** Each customer's balance transactions, oldest first. */
  readonly balanceTransactions = new Map<string, Stripe.CustomerBalanceTransaction[]>();
  /** How the next finalized invoices' payment attempts end (default: paid). */
  finalizeOutcome: 'paid' | 'failed' = 'paid';
  /**
   * Stripe's minimum charge on invoices (belowMinimumCharge): on when set. Off by default so that
   * the tests written before it (whose random prorations go down to 1 cent and compare Stripe's
   * `amount_paid` with the preview) keep their meaning; test/processors/stripe-minimum-charge.test.ts
   * turns it on.
   */
  minimumCharge = false;
  /**
   * How an invoice's discount is spread over its discountable lines (`discount_amounts`). Stripe
   * documents that a discount applies to the discountable lines and reports each line's share, not
   * its exact rounding, so the fake offers two plausible models and Kassa must be right in both:
   * `per-line` (default): percent off each line, rounded half up per line; amount off split in
   * proportion to the lines' amounts, whole cents by largest remainder (ties: the earlier line).
   * `invoice`: percent off the discountable subtotal, rounded half up once, then split as amount
   * off is.
   */
  discountAllocation: 'per-line' | 'invoice' = 'per-line';
  readonly charges = new Map<string, Stripe.Charge>();
  readonly disputes = new Map<string, Stripe.Dispute>();
  /** Invoices the buyer confirmed on the hosted invoice page, in order. */
  readonly invoicesConfirmed: string[] = [];
  /** Every event Stripe would have sent, oldest first (what `GET /v1/events` lists, newest first). */
  readonly log: Stripe.Event[] = [];
  /** Every request received, in order (retries included); `at`: when (ms since the epoch, real time). */
  readonly requests: (StripeRequest & { at: number })[] = [];
  private readonly idempotency = new Map<string, { paramsHash: string; status: number; body: unknown }>();
  private readonly failures: { failure: Failure; path?: string; method?: string }[] = [];
  /** Work run before the next matching request is handled (interleavings a test chooses). */
  private readonly interludes: { run: () => Promise<void>; path: string; method: string }[] = [];
  private readonly hanging = new Set<Response>();
  private readonly sdk = new Stripe('sk_test_signing_only');
  /** What a subscription checkout's Subscription is made from when it completes. */
  /** How long Stripe waits before it finalizes a subscription's draft (its 1-hour finalization grace). */
  static readonly FINALIZATION_GRACE_SECONDS = 3600;
  private readonly pendingSubscriptions = new Map<
    string,
    {
      interval: Stripe.Price.Recurring.Interval;
      intervalCount: number;
      unitAmount: number;
      quantity: number;
      productName: string;
      metadata: Record<string, string>;
      /** subscription_data.trial_period_days, and trial_settings' end behaviour for a missing payment method. */
      trialDays?: number;
      trialSettings?: Stripe.Subscription.TrialSettings;
      /** subscription_data.default_tax_rates (ids). */
      taxRates: string[];
      /** The dynamic tax rate Stripe chose for the buyer's address: the subscription item's tax_rates. */
      itemTaxRates?: string[];
      /** The session's `discounts[0][coupon]`: it becomes the subscription's discount. */
      couponId?: string;
    }
  >();
  /** Coupons (`POST /v1/coupons`), with the percent as sent (decimal text) for exact arithmetic. */
  readonly coupons = new Map<string, { coupon: Stripe.Coupon; percent: string | null }>();
  /** Discounts applied to subscriptions (from a Checkout Session's `discounts`), by id. */
  readonly discounts = new Map<string, Stripe.Discount>();
  /** Tax rates (`POST /v1/tax_rates`), with the percentage as sent (decimal text) for exact arithmetic. */
  readonly taxRates = new Map<string, { rate: Stripe.TaxRate; percentage: string }>();
  /** Whether this account may send `dynamic_tax_rates` (false: Stripe's 400 for an unknown parameter). */
  dynamicTaxRatesAvailable = true;
  /** A session's dynamic tax rates (ids) and what its tax is computed on, until the buyer gives an address. */
  private readonly dynamicTaxRates = new Map<string, { rateIds: string[]; taxable: number }>();
  /** A session's `total_details.breakdown` (Stripe returns it only when expanded). */
  private readonly breakdowns = new Map<string, Stripe.Checkout.Session.TotalDetails.Breakdown>();
  private server: Server | undefined;
  private baseUrl = 'http://stripe.invalid';
  /**
   * How far Stripe's clock runs ahead of Kassa's: what a request that takes that long to reach
   * Stripe sees (Stripe checks `expires_at` against its own creation time), or a skewed clock.
   */
  clockAheadSeconds = 0;

  constructor(
    private readonly options: {
      secretKey: string;
      webhookSecret: string;
      /** Stripe's clock, so tests can use Kassa's manual clock. */
      now: () => Date;
      /** Kassa's event endpoint: the hosted page's Pay button sends the events there, as Stripe would. */
      eventsUrl?: string;
    },
  ) {}

  async start(): Promise<string> {
    const app = express();
    // The SDK sends `expand[0]=payment_intent`.
    app.set('query parser', 'extended');
    app.use(express.urlencoded({ extended: true }));
    // Stripe's hosted payment page (no API key: the buyer's browser opens it).
    app.get('/c/pay/:id', (req, res) => {
      const session = this.sessions.get(req.params.id);
      if (!session || session.status !== 'open') return void res.status(404).type('html').send('<h1>This checkout is no longer available</h1>');
      const email =
        (session.customer_email ? `<p>Paying as ${session.customer_email}</p>` : '<input id="email" name="email" type="email" required>') +
        (session.billing_address_collection === 'required' ? '<input id="country" name="country" required><input id="state" name="state">' : '');
      res.type('html').send(
        `<!doctype html><title>Stripe Checkout (test)</title><h1 data-testid="stripe-amount">${session.currency?.toUpperCase()} ${((session.amount_total ?? 0) / 100).toFixed(2)}</h1>` +
          `<form method="post">${email}<button type="submit">Pay</button></form><a href="${session.cancel_url}">Back</a>`,
      );
    });
    app.post('/c/pay/:id', async (req, res) => {
      const session = this.sessions.get(req.params.id);
      if (!session || session.status !== 'open') return void res.status(404).send('gone');
      const address = session.billing_address_collection === 'required' ? { country: String(req.body.country), ...(req.body.state && { state: String(req.body.state) }) } : undefined;
      const paid = this.complete(session.id, { email: session.customer_email ?? String(req.body.email), ...(address && { address }) });
      res.redirect(303, paid.success_url!);
      // Like Stripe, the event is sent on its own, after the buyer was sent back.
      void this.send(this.log[this.log.length - 1]!).catch(() => undefined);
    });
    // Stripe's hosted invoice page (`hosted_invoice_url`): the buyer confirms an open invoice's
    // payment there (3-D Secure on a renewal); paid, the invoice's `invoice.paid` is recorded and sent.
    app.get('/i/:id', (req, res) => {
      const invoice = this.invoices.get(req.params.id);
      if (!invoice) return void res.status(404).type('html').send('<h1>No such invoice</h1>');
      const amount = `${invoice.currency.toUpperCase()} ${(invoice.amount_due / 100).toFixed(2)}`;
      if (invoice.status !== 'open') return void res.type('html').send(`<!doctype html><title>Invoice paid (test)</title><h1 data-testid="invoice-status">Invoice paid: ${amount}</h1>`);
      res.type('html').send(
        `<!doctype html><title>Stripe invoice (test)</title><h1 data-testid="invoice-amount">${amount}</h1><p>Your bank asks you to confirm this payment.</p>` +
          `<form method="post"><button type="submit" data-testid="confirm-invoice">Confirm payment</button></form>`,
      );
    });
    app.post('/i/:id', async (req, res) => {
      const invoice = this.invoices.get(req.params.id);
      if (!invoice || invoice.status !== 'open') return void res.status(404).send('gone');
      const paid = this.retryInvoice(invoice.id, 'paid');
      this.invoicesConfirmed.push(paid.id);
      const event = this.record('invoice.paid', paid);
      res.redirect(303, `/i/${paid.id}`);
      void this.send(event).catch(() => undefined);
    });
    app.use((req, res, next) => {
      if (req.header('authorization') !== `Bearer ${this.options.secretKey}`) {
        // Echoes the key it was sent, as a careless upstream might: logs must blank it by value.
        return void this.error(res, 401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${req.header('authorization')?.slice(7)}` });
      }
      this.requests.push({ method: req.method, path: req.path, idempotencyKey: req.header('idempotency-key'), body: req.body ?? {}, query: req.query as Record<string, unknown>, at: Date.now() });
      const interlude = this.interludes.findIndex((i) => req.path === i.path && req.method === i.method);
      if (interlude >= 0) {
        const { run } = this.interludes.splice(interlude, 1)[0]!;
        return void run().then(() => next(), next);
      }
      const queued = this.failures.findIndex((f) => (!f.path || req.path.startsWith(f.path)) && (!f.method || f.method === req.method));
      const failure = queued >= 0 ? this.failures.splice(queued, 1)[0]!.failure : undefined;
      if (failure === 'hang') return void this.hanging.add(res);
      if (failure === 'error500') return void this.error(res, 500, { type: 'api_error', message: 'An unknown error occurred' });
      if (failure === 'unauthorized') return void this.error(res, 401, { type: 'invalid_request_error', message: 'Invalid API Key provided: sk_test_****' });
      if (failure?.startsWith('rateLimit:')) {
        res.set('Retry-After', failure.slice('rateLimit:'.length));
        return void this.error(res, 429, { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests hit the API too quickly.' });
      }
      // A slow Stripe: the request is handled (the object made) only after this many ms.
      if (failure?.startsWith('delay:')) return void setTimeout(next, Number(failure.slice('delay:'.length)));
      if (failure === 'answerThenHang') {
        // The handler runs (and Stripe stores its idempotent answer); the answer is never sent.
        this.hanging.add(res);
        res.json = () => res;
      }
      next();
    });
    app.post('/v1/checkout/sessions', (req, res) => this.idempotent(req, res, () => this.createSession(req.body)));
    app.post('/v1/tax_rates', (req, res) => this.idempotent(req, res, () => this.createTaxRate(req.body)));
    app.post('/v1/coupons', (req, res) => this.idempotent(req, res, () => this.createCoupon(req.body)));
    app.get('/v1/coupons/:id', (req, res) => {
      const found = this.coupons.get(req.params.id);
      if (!found) return void res.status(404).json(missingObject('coupon', req.params.id));
      res.json(found.coupon);
    });
    app.get('/v1/tax_rates/:id', (req, res) => {
      const found = this.taxRates.get(req.params.id);
      if (!found) return void this.missing(res, req.params.id);
      res.json(found.rate);
    });
    // Stripe's list: newest first, `created` filters, paged with starting_after.
    app.get('/v1/checkout/sessions', (req, res) => {
      const q = req.query as { created?: Record<string, string>; limit?: string; starting_after?: string };
      const bound = (k: string) => (q.created?.[k] === undefined ? undefined : Number(q.created[k]));
      const [gt, gte, lt, lte] = [bound('gt'), bound('gte'), bound('lt'), bound('lte')];
      let all = [...this.sessions.values()]
        .map((s, seq) => ({ s, seq }))
        .filter(({ s }) => (gt === undefined || s.created > gt) && (gte === undefined || s.created >= gte) && (lt === undefined || s.created < lt) && (lte === undefined || s.created <= lte))
        .sort((a, b) => b.s.created - a.s.created || b.seq - a.seq)
        .map(({ s }) => s);
      if (q.starting_after) all = all.slice(all.findIndex((s) => s.id === q.starting_after) + 1);
      const limit = Math.min(Number(q.limit ?? 10), 100);
      res.json({ object: 'list', data: all.slice(0, limit), has_more: all.length > limit, url: '/v1/checkout/sessions' });
    });
    app.get('/v1/checkout/sessions/:id', (req, res) => {
      const session = this.sessions.get(req.params.id);
      if (!session) return void this.missing(res, req.params.id);
      const expand = ([] as unknown[]).concat((req.query.expand as unknown) ?? []);
      const intent = typeof session.payment_intent === 'string' ? this.intents.get(session.payment_intent) : undefined;
      let body: Stripe.Checkout.Session = expand.includes('payment_intent') && intent ? { ...session, payment_intent: intent } : session;
      const breakdown = this.breakdowns.get(session.id);
      if (expand.includes('total_details.breakdown') && body.total_details && breakdown) body = { ...body, total_details: { ...body.total_details, breakdown } };
      res.json(body);
    });
    app.post('/v1/checkout/sessions/:id/expire', (req, res) =>
      this.idempotent(req, res, () => {
        const session = this.sessions.get(req.params.id as string);
        if (!session) return { status: 404, body: missingBody(req.params.id as string) };
        if (session.status !== 'open') {
          return { status: 400, body: { error: { type: 'invalid_request_error', message: `Only Checkout Sessions with a status of 'open' can be expired (this one is ${session.status}).` } } };
        }
        return { status: 200, body: this.expireNow(session.id) };
      }),
    );
    app.post('/v1/refunds', (req, res) => this.idempotent(req, res, () => this.createRefund(req.body)));
    // Stripe's list: newest first, filtered by charge, paged by `starting_after`.
    app.get('/v1/refunds', (req, res) => {
      const all = [...this.refunds.values()].filter((r) => !req.query.charge || r.charge === req.query.charge).reverse();
      const after = req.query.starting_after ? all.findIndex((r) => r.id === req.query.starting_after) + 1 : 0;
      const limit = Number(req.query.limit ?? 10);
      const data = all.slice(after, after + limit);
      res.json({ object: 'list', url: '/v1/refunds', has_more: after + limit < all.length, data } satisfies Stripe.ApiList<Stripe.Refund>);
    });
    app.get('/v1/accounts/:id', (req, res) => {
      const account = this.accounts.get(req.params.id);
      if (!account) return void this.error(res, 404, { type: 'invalid_request_error', message: `No such account: '${req.params.id}'` });
      res.json(account);
    });
    app.get('/v1/subscriptions/:id', (req, res) => {
      const sub = this.subscriptions.get(req.params.id);
      if (!sub) return void res.status(404).json(missingObject('subscription', req.params.id));
      // `discounts` is expandable: the Discount objects instead of their ids.
      const expand = ([] as unknown[]).concat((req.query.expand as unknown) ?? []);
      if (!expand.includes('discounts')) return void res.json(sub);
      res.json({ ...sub, discounts: sub.discounts.map((d) => (typeof d === 'string' ? (this.discounts.get(d) ?? d) : d)) });
    });
    app.post('/v1/subscriptions/:id', (req, res) => this.idempotent(req, res, () => this.updateSubscription(req.params.id as string, req.body)));
    app.post('/v1/products', (req, res) => this.idempotent(req, res, () => this.createProduct(req.body)));
    app.post('/v1/prices', (req, res) => this.idempotent(req, res, () => this.createPrice(req.body)));
    // Cancel. Stripe ignores Idempotency-Key on DELETE (nothing is replayed), and answers a cancel
    // of a canceled subscription as if it did not exist (404 resource_missing), though GET still reads it.
    app.delete('/v1/subscriptions/:id', (req, res) => {
      const sub = this.subscriptions.get(req.params.id);
      if (!sub || sub.status === 'canceled') return void res.status(404).json(missingObject('subscription', req.params.id));
      res.json(this.endSubscription(sub.id, 'cancellation_requested'));
    });
    app.post('/v1/invoices', (req, res) => this.idempotent(req, res, () => this.createDraftInvoice(req.body)));
    app.post('/v1/invoices/:id/finalize', (req, res) => this.idempotent(req, res, () => this.finalizeInvoice(req.params.id as string, req.body)));
    app.post('/v1/invoices/:id/pay', (req, res) => this.idempotent(req, res, () => this.payInvoice(req.params.id as string)));
    app.post('/v1/invoices/:id/void', (req, res) => this.idempotent(req, res, () => this.voidInvoice(req.params.id as string)));
    app.delete('/v1/invoices/:id', (req, res) => {
      const r = this.deleteDraftInvoice(req.params.id as string);
      res.status(r.status).json(r.body);
    });
    app.post('/v1/invoices/:id', (req, res) => this.idempotent(req, res, () => this.updateInvoice(req.params.id as string, req.body)));
    app.get('/v1/invoices/:id/lines', (req, res) => {
      const invoice = this.invoices.get(req.params.id);
      if (!invoice) return void res.status(404).json(missingObject('invoice', req.params.id));
      const all = invoice.lines.data;
      const after = req.query.starting_after ? all.findIndex((l) => l.id === req.query.starting_after) + 1 : 0;
      const limit = Number(req.query.limit ?? 10);
      res.json({ object: 'list', url: `/v1/invoices/${invoice.id}/lines`, has_more: after + limit < all.length, data: all.slice(after, after + limit) } satisfies Stripe.ApiList<Stripe.InvoiceLineItem>);
    });
    app.post('/v1/invoiceitems', (req, res) => this.idempotent(req, res, () => this.createInvoiceItem(req.body)));
    app.get('/v1/customers/:id', (req, res) => {
      const customer = this.customer(req.params.id as string);
      if (!customer) return res.status(404).json(missingObject('customer', req.params.id as string));
      return res.json(customer);
    });
    app.get('/v1/customers/:id/balance_transactions', (req, res) => {
      const list = [...(this.balanceTransactions.get(req.params.id as string) ?? [])].reverse();
      res.json({ object: 'list', data: list, has_more: false, url: `/v1/customers/${req.params.id as string}/balance_transactions` } satisfies Stripe.ApiList<Stripe.CustomerBalanceTransaction>);
    });
    app.get('/v1/invoices/:id', (req, res) => {
      const invoice = this.invoices.get(req.params.id);
      if (!invoice) return void res.status(404).json(missingObject('invoice', req.params.id));
      const expand = ([] as unknown[]).concat((req.query.expand as unknown) ?? []);
      // `payments` is includable only: left out unless expanded, as Stripe does.
      const { payments, ...rest } = invoice;
      if (!expand.includes('payments')) return void res.json(rest satisfies Stripe.Invoice);
      if (!expand.includes('payments.data.payment.payment_intent')) return void res.json(invoice);
      const withIntents: Stripe.ApiList<Stripe.InvoicePayment> = {
        ...payments!,
        data: payments!.data.map((p) => {
          const intent = typeof p.payment.payment_intent === 'string' ? this.intents.get(p.payment.payment_intent) : undefined;
          return intent ? { ...p, payment: { ...p.payment, payment_intent: intent } } : p;
        }),
      };
      res.json({ ...invoice, payments: withIntents } satisfies Stripe.Invoice);
    });
    const retrieve = <T>(objects: Map<string, T>, kind: string) => (req: Request, res: Response) => {
      const found = objects.get(req.params.id as string);
      if (!found) return void res.status(404).json({ error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${kind}: '${req.params.id}'`, param: 'id' } });
      res.json(found);
    };
    app.get('/v1/payment_intents/:id', retrieve(this.intents, 'payment_intent'));
    app.get('/v1/charges/:id', retrieve(this.charges, 'charge'));
    app.get('/v1/disputes/:id', retrieve(this.disputes, 'dispute'));
    app.get('/v1/refunds/:id', retrieve(this.refunds, 'refund'));
    app.get('/v1/events', (req, res) => res.json(this.listEvents(req.query as EventListQuery)));
    app.use((req, res) => this.error(res, 404, { type: 'invalid_request_error', message: `Unrecognized request URL (${req.method}: ${req.path})` }));
    this.server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  /** Posts a signed event to Kassa's endpoint over HTTP, as Stripe does; returns the status. */
  async send(event: Stripe.Event): Promise<number> {
    if (!this.options.eventsUrl) throw new Error('no eventsUrl to send events to');
    const { payload, signature } = this.signed(event);
    const res = await fetch(this.options.eventsUrl, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': signature }, body: payload });
    return res.status;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.socket?.destroy();
    this.hanging.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** The next `count` requests (to paths starting with `path`, and of `method`, when given) fail this way; then answers resume. */
  failNext(failure: Failure, count = 1, path?: string, method?: 'GET' | 'POST' | 'DELETE'): void {
    for (let i = 0; i < count; i++) this.failures.push({ failure, path, method });
  }

  /**
   * Before the next `method` request to `path` is handled, `run` runs (and is awaited): what else
   * happens while that request is in flight, in an order the test chooses (no timing).
   */
  beforeNext(method: 'GET' | 'POST' | 'DELETE', path: string, run: () => Promise<void>): void {
    this.interludes.push({ run, path, method });
  }

  /** Failures queued by failNext and not used yet are dropped. */
  clearFailures(): void {
    this.failures.length = 0;
  }

  // ---- what happens on Stripe's side ----

  /** A connected account of the platform; `transfers` is its capability to receive transfers (onboarding done: active). */
  connectAccount(transfers: 'active' | 'inactive' | 'pending' = 'active'): Stripe.Account {
    const account: Stripe.Account = {
      id: `acct_${randomBytes(8).toString('hex')}`,
      object: 'account',
      capabilities: { transfers },
      charges_enabled: transfers === 'active',
      country: 'US',
      created: this.seconds(),
      details_submitted: transfers !== 'inactive',
      email: null,
      payouts_enabled: transfers === 'active',
      type: 'express',
    };
    this.accounts.set(account.id, account);
    return account;
  }

  /** The account is restricted in Stripe (its transfers capability lapses); Stripe sends Connect's `account.updated`. */
  restrictAccount(accountId: string): Stripe.Event {
    return this.updateAccount(accountId, { capabilities: { ...this.accounts.get(accountId)!.capabilities, transfers: 'inactive' }, charges_enabled: false });
  }

  /** A change of a connected account on Stripe's side (onboarding, a review, a lapsed capability): Connect's `account.updated`, with `account` set. */
  updateAccount(accountId: string, changes: Partial<Stripe.Account>): Stripe.Event {
    const account = { ...this.accounts.get(accountId)!, ...changes };
    this.accounts.set(accountId, account);
    const event = { ...this.record('account.updated', account), account: accountId } as Stripe.Event;
    this.log[this.log.length - 1] = event;
    return event;
  }

  /**
   * The buyer pays on Stripe's page: `paid` at once (a card), or `processing` (an asynchronous
   * method, settled later by settleAsync). Returns the session as Stripe now has it.
   */
  complete(sessionId: string, buyer: { email: string; outcome?: 'paid' | 'processing'; address?: { country: string; state?: string; postal_code?: string } }): Stripe.Checkout.Session {
    let session = this.mustGet(sessionId);
    if (session.status !== 'open') throw new Error(`cannot complete a ${session.status} session`);
    if (session.billing_address_collection === 'required' && !buyer.address) throw new Error('this session requires a billing address: complete it with buyer.address');
    const address: Stripe.Address | null = buyer.address
      ? { city: null, country: buyer.address.country, line1: null, line2: null, postal_code: buyer.address.postal_code ?? null, state: buyer.address.state ?? null }
      : null;
    session = this.applyDynamicTax(session, address);
    const paid = (buyer.outcome ?? 'paid') === 'paid';
    if (session.mode === 'subscription') {
      if (!paid) throw new Error('this fake pays subscription checkouts by card only');
      const { subscription, invoice } = this.startSubscription(session, buyer.email);
      const completed = this.update(sessionId, {
        status: 'complete',
        payment_status: 'paid',
        subscription: subscription.id,
        invoice: invoice.id,
        customer: subscription.customer as string,
        customer_details: { address, business_name: null, email: buyer.email, individual_name: null, name: null, phone: null, tax_exempt: 'none', tax_ids: [] },
      });
      this.record('checkout.session.completed', completed);
      return completed;
    }
    const earlier = typeof session.payment_intent === 'string' ? this.intents.get(session.payment_intent) : undefined;
    const intent = this.setIntentStatus(earlier ?? this.createIntent(session, 'requires_payment_method'), paid ? 'succeeded' : 'processing');
    this.createCharge(intent, buyer.email, paid ? 'succeeded' : 'pending');
    const completed = this.update(sessionId, {
      status: 'complete',
      payment_status: paid ? 'paid' : 'unpaid',
      payment_intent: intent.id,
      customer_details: { address, business_name: null, email: buyer.email, individual_name: null, name: null, phone: null, tax_exempt: 'none', tax_ids: [] },
    });
    this.record('checkout.session.completed', completed);
    return completed;
  }

  /**
   * Stripe's choice among a session's dynamic tax rates for the buyer's address: the rate of the
   * address's country (and state, for a rate that has one), else none; the session's totals and
   * breakdown then carry its tax, and a subscription's item takes it as its `tax_rates`.
   */
  private applyDynamicTax(session: Stripe.Checkout.Session, address: Stripe.Address | null): Stripe.Checkout.Session {
    const dynamic = this.dynamicTaxRates.get(session.id);
    if (!dynamic || !address?.country) return session;
    const chosen = dynamic.rateIds.find((r) => {
      const rate = this.taxRates.get(r)!.rate;
      return rate.country === address.country && (!rate.state || rate.state === address.state);
    });
    const tax = this.taxFor(dynamic.taxable, chosen ? [chosen] : []);
    this.breakdowns.set(session.id, { ...this.breakdowns.get(session.id)!, taxes: breakdownTaxes(tax.taxes) });
    const plan = this.pendingSubscriptions.get(session.id);
    if (plan) this.pendingSubscriptions.set(session.id, { ...plan, itemTaxRates: chosen ? [chosen] : [] });
    return this.update(session.id, {
      amount_total: dynamic.taxable + tax.added,
      total_details: { ...session.total_details!, amount_tax: tax.taxes.reduce((sum, t) => sum + t.amount, 0) },
    });
  }

  /** A card declined on Stripe's page: the session stays open; its PaymentIntent records the error. */
  declineAttempt(sessionId: string, declineCode = 'insufficient_funds'): Stripe.PaymentIntent {
    const session = this.mustGet(sessionId);
    if (session.status !== 'open') throw new Error(`cannot pay a ${session.status} session`);
    const earlier = typeof session.payment_intent === 'string' ? this.intents.get(session.payment_intent) : undefined;
    const intent: Stripe.PaymentIntent = {
      ...(earlier ?? this.createIntent(session, 'requires_payment_method')),
      status: 'requires_payment_method',
      last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: declineCode, message: 'Your card was declined.', charge: id('ch') },
    };
    this.intents.set(intent.id, intent);
    this.update(sessionId, { payment_intent: intent.id });
    this.record('payment_intent.payment_failed', intent);
    return intent;
  }

  /**
   * A PaymentIntent made outside any Checkout Session (by another integration on the account, or
   * by hand with the API, so its metadata says whatever its maker wrote) whose card was declined.
   */
  declineStandaloneIntent(amount: number, currency: string, metadata: Record<string, string>, declineCode = 'card_declined'): Stripe.PaymentIntent {
    const intent: Stripe.PaymentIntent = {
      ...this.createIntentFor(amount, currency, 'requires_payment_method', metadata),
      last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: declineCode, message: 'Your card was declined.', charge: id('ch') },
    };
    this.intents.set(intent.id, intent);
    this.record('payment_intent.payment_failed', intent);
    return intent;
  }

  /** An asynchronous payment settles: its session is paid, or its PaymentIntent asks for another method. */
  settleAsync(sessionId: string, outcome: 'succeeded' | 'failed'): Stripe.Checkout.Session {
    const session = this.mustGet(sessionId);
    const intent = this.setIntentStatus(this.intents.get(session.payment_intent as string)!, outcome === 'succeeded' ? 'succeeded' : 'requires_payment_method');
    const charge = this.charges.get(intent.latest_charge as string)!;
    this.charges.set(charge.id, { ...charge, status: outcome === 'succeeded' ? 'succeeded' : 'failed', paid: outcome === 'succeeded', amount_captured: outcome === 'succeeded' ? charge.amount : 0 });
    if (outcome === 'failed') {
      this.intents.set(intent.id, { ...intent, last_payment_error: { type: 'card_error', code: 'payment_method_provider_decline', message: 'The payment failed.', charge: charge.id } });
      this.record('checkout.session.async_payment_failed', session);
      this.record('payment_intent.payment_failed', this.intents.get(intent.id)!);
      return session;
    }
    const paid = this.update(sessionId, { payment_status: 'paid' });
    this.record('checkout.session.async_payment_succeeded', paid);
    return paid;
  }

  /** The buyer's bank opens a dispute (chargeback) on the payment. */
  openDispute(paymentIntentId: string, reason = 'fraudulent'): Stripe.Dispute {
    const intent = this.intents.get(paymentIntentId)!;
    const charge = this.charges.get(intent.latest_charge as string)!;
    this.charges.set(charge.id, { ...charge, disputed: true });
    const dispute: Stripe.Dispute = {
      id: id('dp'),
      object: 'dispute',
      amount: charge.amount,
      balance_transactions: [],
      charge: charge.id,
      created: this.seconds(),
      currency: charge.currency,
      enhanced_eligibility_types: [],
      evidence: {
        access_activity_log: null,
        billing_address: null,
        cancellation_policy: null,
        cancellation_policy_disclosure: null,
        cancellation_rebuttal: null,
        customer_communication: null,
        customer_email_address: null,
        customer_name: null,
        customer_purchase_ip: null,
        customer_signature: null,
        duplicate_charge_documentation: null,
        duplicate_charge_explanation: null,
        duplicate_charge_id: null,
        enhanced_evidence: {},
        product_description: null,
        receipt: null,
        refund_policy: null,
        refund_policy_disclosure: null,
        refund_refusal_explanation: null,
        service_date: null,
        service_documentation: null,
        shipping_address: null,
        shipping_carrier: null,
        shipping_date: null,
        shipping_documentation: null,
        shipping_tracking_number: null,
        uncategorized_file: null,
        uncategorized_text: null,
      },
      evidence_details: { due_by: this.seconds() + 7 * 24 * 3600, enhanced_eligibility: {}, has_evidence: false, past_due: false, submission_count: 0, submission_method: 'not_submitted' },
      intended_submission_method: null,
      is_charge_refundable: false,
      livemode: false,
      metadata: {},
      payment_intent: intent.id,
      reason,
      status: 'needs_response',
    };
    this.disputes.set(dispute.id, dispute);
    this.record('charge.dispute.created', dispute);
    return dispute;
  }

  /** The card network decides the dispute. */
  closeDispute(disputeId: string, outcome: 'won' | 'lost'): Stripe.Dispute {
    const closed: Stripe.Dispute = { ...this.disputes.get(disputeId)!, status: outcome };
    this.disputes.set(disputeId, closed);
    this.record('charge.dispute.closed', closed);
    return closed;
  }

  /** Stripe's own expiry of an open session (its expires_at passed, or an API call). */
  expireNow(sessionId: string): Stripe.Checkout.Session {
    const expired = this.update(sessionId, { status: 'expired', url: null });
    this.record('checkout.session.expired', expired);
    return expired;
  }

  /** A refund made outside Kassa (in the Stripe Dashboard). */
  refundInDashboard(paymentIntentId: string, amount: number): Stripe.Refund {
    const answer = this.createRefund({ payment_intent: paymentIntentId, amount: String(amount) });
    if (answer.status !== 200) throw new Error(JSON.stringify(answer.body));
    return answer.body as Stripe.Refund;
  }

  /**
   * A refund fails after it was made (the buyer's card was closed, say): Stripe takes it back out
   * of the charge's `amount_refunded` and sends `refund.failed` and `charge.refund.updated`.
   */
  failRefund(refundId: string, failureReason: Stripe.Refund['failure_reason'] = 'expired_or_canceled_card'): Stripe.Refund {
    const refund = this.refunds.get(refundId)!;
    const failed: Stripe.Refund = { ...refund, status: 'failed', failure_reason: failureReason };
    this.refunds.set(refundId, failed);
    const charge = this.charges.get(refund.charge as string)!;
    this.charges.set(charge.id, { ...charge, amount_refunded: charge.amount_refunded - refund.amount, refunded: false });
    this.record('charge.refund.updated', failed);
    this.record('refund.failed', failed);
    return failed;
  }

  /**
   * A renewal whose off-session charge the bank sends to 3-D Secure: the invoice stays open, its
   * PaymentIntent `requires_action`, with a hosted page for the buyer; Stripe sends
   * `invoice.payment_failed` and `invoice.payment_action_required`. `retryInvoice(…, 'paid')`
   * is the buyer confirming on that page.
   */
  renewRequiringAction(subscriptionId: string): Stripe.Invoice {
    const failed = this.renew(subscriptionId, 'failed');
    const attempt = failed.payments!.data.at(-1)!;
    const intentId = attempt.payment.payment_intent as string;
    this.intents.set(intentId, { ...this.intents.get(intentId)!, status: 'requires_action' });
    const invoice: Stripe.Invoice = { ...failed, hosted_invoice_url: `${this.baseUrl}/i/${failed.id}` };
    this.invoices.set(invoice.id, invoice);
    this.record('invoice.payment_failed', invoice);
    this.record('invoice.payment_action_required', invoice);
    return invoice;
  }

  /** The latest recorded event of this type (about this object, when given). */
  lastEvent(type: Stripe.Event.Type, objectId?: string): Stripe.Event {
    const found = [...this.log].reverse().find((e) => e.type === type && (!objectId || (e.data.object as { id?: string }).id === objectId));
    if (!found) throw new Error(`no ${type} event${objectId ? ` about ${objectId}` : ''} was recorded`);
    return found;
  }

  /** A Stripe event about this session as it is now (or as given: a stale copy). */
  event(type: CheckoutEventType, session: Stripe.Checkout.Session = this.latest()): Stripe.Event {
    return this.eventFor(type, session);
  }

  /** A Stripe Billing event about this invoice (or subscription) as given: now, or a stale copy. */
  invoiceEvent(type: InvoiceEventType, invoice: Stripe.Invoice): Stripe.Event {
    return this.eventFor(type, invoice);
  }

  subscriptionEvent(type: SubscriptionEventType, subscription: Stripe.Subscription): Stripe.Event {
    return this.eventFor(type, subscription);
  }

  /** A Stripe event of any type about an object (not recorded: see `record`). */
  eventFor(type: Stripe.Event.Type, object: { id: string }, previousAttributes?: Record<string, unknown>): Stripe.Event {
    const base = {
      id: id('evt'),
      object: 'event' as const,
      api_version: null,
      created: this.seconds(),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
    };
    return { ...base, type, data: { object, ...(previousAttributes && { previous_attributes: previousAttributes }) } } as unknown as Stripe.Event;
  }

  /** Records the event Stripe sends for a change on its side (listed by `GET /v1/events`). */
  private record(type: Stripe.Event.Type, object: { id: string }, previousAttributes?: Record<string, unknown>): Stripe.Event {
    // A copy as Stripe would send it (JSON: the SDK's Decimal amounts as their strings), not a live reference.
    const event = this.eventFor(type, JSON.parse(JSON.stringify(object)) as { id: string }, previousAttributes && (JSON.parse(JSON.stringify(previousAttributes)) as Record<string, unknown>));
    this.log.push(event);
    return event;
  }

  /** Stripe's `GET /v1/events`: newest first, filtered by types and created, paged by event id. */
  private listEvents(query: EventListQuery): Stripe.ApiList<Stripe.Event> {
    const types = query.types ? ([] as string[]).concat(query.types) : query.type ? [query.type] : undefined;
    const created = typeof query.created === 'object' ? query.created : undefined;
    const bound = (name: keyof NonNullable<EventListQuery['created']>) => (created?.[name] === undefined ? undefined : Number(created[name]));
    const [gt, gte, lt, lte] = [bound('gt'), bound('gte'), bound('lt'), bound('lte')];
    let matching = this.log
      .map((event, seq) => ({ event, seq }))
      .filter(({ event: e }) => (!types || types.includes(e.type)) && (gt === undefined || e.created > gt) && (gte === undefined || e.created >= gte) && (lt === undefined || e.created < lt) && (lte === undefined || e.created <= lte))
      .sort((a, b) => b.event.created - a.event.created || b.seq - a.seq)
      .map(({ event }) => event);
    const limit = Math.min(Number(query.limit ?? 10), 100);
    if (query.starting_after) matching = matching.slice(matching.findIndex((e) => e.id === query.starting_after) + 1);
    let page = matching.slice(0, limit);
    if (query.ending_before) {
      const before = matching.slice(0, Math.max(matching.findIndex((e) => e.id === query.ending_before), 0));
      page = before.slice(-limit);
      return { object: 'list', data: page, has_more: before.length > limit, url: '/v1/events' };
    }
    return { object: 'list', data: page, has_more: matching.length > limit, url: '/v1/events' };
  }

  /**
   * The body and Stripe-Signature header Stripe would send for this event (`secret` to sign it
   * wrongly; `timestamp`, seconds since the epoch, to sign it at another time than now).
   */
  signed(event: Stripe.Event, secret = this.options.webhookSecret, timestamp = this.seconds()): { payload: string; signature: string } {
    return this.signPayload(JSON.stringify(event, null, 2), secret, timestamp);
  }

  /** Any payload signed as Stripe signs events. */
  signPayload(payload: string, secret = this.options.webhookSecret, timestamp = this.seconds()): { payload: string; signature: string } {
    return { payload, signature: this.sdk.webhooks.generateTestHeaderString({ payload, secret, timestamp }) };
  }

  /** The session created last. */
  latest(): Stripe.Checkout.Session {
    const all = [...this.sessions.values()];
    if (all.length === 0) throw new Error('no Checkout Session was created');
    return all[all.length - 1]!;
  }

  // ---- Stripe Billing's side ----

  /**
   * The subscription's period ends and Billing makes the next period's invoice as a **draft**
   * (`invoice.created`), as Stripe does: the subscription moves to the next period; the draft is
   * finalized and charged `FINALIZATION_GRACE_SECONDS` later by `finalizeDue` unless its
   * `auto_advance` was set false (then only `POST /v1/invoices/:id/finalize` does).
   */
  renewDraft(subscriptionId: string): Stripe.Invoice {
    const sub = this.mustGetSubscription(subscriptionId);
    if (sub.status === 'canceled') throw new Error('a canceled subscription does not renew');
    const item = sub.items.data[0]!;
    const recurring = item.price.recurring!;
    const start = item.current_period_end;
    // As renew: the trial's end anchors the cycle, the first paid period is one interval from it
    // (and the subscription is `active` from the trial's end).
    const trialing = sub.status === 'trialing';
    const end = stripePeriodEnd(sub.billing_cycle_anchor, recurring.interval, recurring.interval_count, trialing ? 1 : this.periodIndex(sub) + 2);
    const moved = this.setSubscription(subscriptionId, { items: { ...sub.items, data: [{ ...item, current_period_start: start, current_period_end: end }] }, ...(trialing && { status: 'active' as const }) });
    const invoice = this.createInvoice(moved, 'subscription_cycle', { start, end }, 'paid', undefined, undefined, true);
    this.setSubscription(subscriptionId, { latest_invoice: invoice.id });
    this.record('invoice.created', invoice);
    return invoice;
  }

  /** Billing's pass: drafts whose finalization time has come and that may advance are finalized and charged. */
  finalizeDue(): Stripe.Invoice[] {
    const due = [...this.invoices.values()].filter((i) => i.status === 'draft' && i.auto_advance && i.automatically_finalizes_at !== null && i.automatically_finalizes_at <= this.seconds());
    return due.map((i) => this.finalizeAndCharge(i.id, true));
  }

  /**
   * The subscription's period ends and Billing invoices the next one: the subscription moves to
   * the next period and its `subscription_cycle` invoice is paid (`active`) or its payment fails
   * (`past_due`, Stripe's dunning retries it). Returns the invoice as Stripe now has it.
   */
  renew(subscriptionId: string, outcome: 'paid' | 'failed' = 'paid'): Stripe.Invoice {
    const sub = this.mustGetSubscription(subscriptionId);
    if (sub.status === 'canceled') throw new Error('a canceled subscription does not renew');
    const item = sub.items.data[0]!;
    const recurring = item.price.recurring!;
    const start = item.current_period_end;
    // The trial's end anchors the cycle: the first paid period is one interval from it.
    const end =
      sub.status === 'trialing'
        ? stripePeriodEnd(sub.billing_cycle_anchor, recurring.interval, recurring.interval_count, 1)
        : stripePeriodEnd(sub.billing_cycle_anchor, recurring.interval, recurring.interval_count, this.periodIndex(sub) + 2);
    const moved = this.setSubscription(subscriptionId, {
      items: { ...sub.items, data: [{ ...item, current_period_start: start, current_period_end: end }] },
      status: outcome === 'paid' ? 'active' : 'past_due',
    });
    const invoice = this.createInvoice(moved, 'subscription_cycle', { start, end }, outcome);
    this.setSubscription(subscriptionId, { latest_invoice: invoice.id });
    return invoice;
  }

  /** Stripe's dunning retries a failed invoice: paid now (the subscription is `active` again) or failed once more. */
  retryInvoice(invoiceId: string, outcome: 'paid' | 'failed'): Stripe.Invoice {
    const invoice = this.invoices.get(invoiceId)!;
    if (invoice.status !== 'open') throw new Error(`cannot retry a ${invoice.status} invoice`);
    const subscriptionId = invoice.parent!.subscription_details!.subscription as string;
    if (outcome === 'paid') this.setSubscription(subscriptionId, { status: 'active' });
    return this.settleInvoice(invoice, outcome);
  }

  /**
   * An invoice of the subscription outside its cycle, made in the Dashboard: a proration after a
   * plan or quantity change (`subscription_update`, its line a proration for the rest of the
   * current period) or a `manual` one, charged at once for `amount`. Returns it as Stripe has it.
   */
  invoiceOutsideCycle(subscriptionId: string, reason: 'subscription_update' | 'manual', amount: number, outcome: 'paid' | 'failed' = 'paid'): Stripe.Invoice {
    const sub = this.mustGetSubscription(subscriptionId);
    const item = sub.items.data[0]!;
    const invoice = this.createInvoice(sub, reason, { start: this.seconds(), end: item.current_period_end }, outcome, amount);
    return invoice;
  }

  /**
   * An invoice outside the cycle whose card payment failed, then marked paid in the Dashboard
   * (paid out of band): its paid payment is a payment record, not a PaymentIntent.
   */
  invoicePaidOutOfBand(subscriptionId: string, reason: 'subscription_update' | 'manual', amount: number): Stripe.Invoice {
    const open = this.invoiceOutsideCycle(subscriptionId, reason, amount, 'failed');
    const now = this.seconds();
    const record: Stripe.InvoicePayment = {
      id: id('inpay'),
      object: 'invoice_payment',
      amount_paid: open.amount_due,
      amount_requested: open.amount_due,
      created: now,
      currency: open.currency,
      invoice: open.id,
      is_default: false,
      livemode: false,
      payment: { payment_record: id('pr'), type: 'payment_record' },
      status: 'paid',
      status_transitions: { canceled_at: null, paid_at: now },
    };
    const paid: Stripe.Invoice = {
      ...open,
      status: 'paid',
      amount_paid: open.amount_due,
      amount_remaining: 0,
      payments: { ...open.payments!, data: [...open.payments!.data, record] },
      status_transitions: { ...open.status_transitions, paid_at: now },
    };
    this.invoices.set(paid.id, paid);
    return paid;
  }

  /** The period end of a subscription set to cancel at period end: Billing ends it. */
  endAtPeriodEnd(subscriptionId: string): Stripe.Subscription {
    const sub = this.mustGetSubscription(subscriptionId);
    if (!sub.cancel_at_period_end) throw new Error('this subscription is not set to cancel at period end');
    return this.endSubscription(subscriptionId, 'cancellation_requested', sub.items.data[0]!.current_period_end);
  }

  /** Stripe's dunning gives up on a failed invoice (the account's setting "cancel the subscription"). */
  giveUp(subscriptionId: string): Stripe.Subscription {
    return this.endSubscription(subscriptionId, 'payment_failed');
  }

  /** A change made in the Stripe Dashboard (outside Kassa). */
  changeInDashboard(subscriptionId: string, changes: Partial<Stripe.Subscription>): Stripe.Subscription {
    return this.setSubscription(subscriptionId, changes);
  }

  /** The subscription made by a completed subscription checkout. */
  subscriptionOf(checkoutSessionId: string): Stripe.Subscription {
    return this.mustGetSubscription(this.mustGet(checkoutSessionId).subscription as string);
  }

  private startSubscription(session: Stripe.Checkout.Session, email: string): { subscription: Stripe.Subscription; invoice: Stripe.Invoice } {
    const plan = this.pendingSubscriptions.get(session.id)!;
    const now = this.seconds();
    const subscriptionId = id('sub');
    const productId = id('prod');
    const priceId = id('price');
    const customerId = id('cus');
    // A trial is the first period: it ends at trial_end, which anchors the billing cycle.
    const trialEnd = plan.trialDays ? now + plan.trialDays * 86400 : undefined;
    const end = trialEnd ?? stripePeriodEnd(now, plan.interval, plan.intervalCount, 1);
    this.products.set(productId, this.product(productId, plan.productName, {}));
    const price: Stripe.Price = {
      id: priceId,
      object: 'price',
      active: false,
      billing_scheme: 'per_unit',
      created: now,
      currency: session.currency!,
      custom_unit_amount: null,
      livemode: false,
      lookup_key: null,
      metadata: {},
      nickname: null,
      product: productId,
      recurring: { interval: plan.interval, interval_count: plan.intervalCount, meter: null, trial_period_days: null, usage_type: 'licensed' },
      tax_behavior: 'unspecified',
      tiers_mode: null,
      transform_quantity: null,
      type: 'recurring',
      unit_amount: plan.unitAmount,
      unit_amount_decimal: Stripe.Decimal.from(plan.unitAmount),
    };
    this.prices.set(priceId, price);
    const stripePlan: Stripe.Plan = {
      id: priceId,
      object: 'plan',
      active: false,
      amount: plan.unitAmount,
      amount_decimal: Stripe.Decimal.from(plan.unitAmount),
      billing_scheme: 'per_unit',
      created: now,
      currency: session.currency!,
      interval: plan.interval,
      interval_count: plan.intervalCount,
      livemode: false,
      metadata: {},
      meter: null,
      nickname: null,
      product: productId,
      tiers_mode: null,
      transform_usage: null,
      trial_period_days: null,
      usage_type: 'licensed',
    };
    const item: Stripe.SubscriptionItem = {
      id: id('si'),
      object: 'subscription_item',
      billing_thresholds: null,
      created: now,
      current_period_end: end,
      current_period_start: now,
      current_trial: null,
      discounts: [],
      metadata: {},
      plan: stripePlan,
      price,
      quantity: plan.quantity,
      subscription: subscriptionId,
      tax_rates: (plan.itemTaxRates ?? []).map((r) => this.taxRates.get(r)!.rate),
    };
    const subscription: Stripe.Subscription = {
      id: subscriptionId,
      object: 'subscription',
      application: null,
      application_fee_percent: null,
      automatic_tax: { disabled_reason: null, enabled: false, liability: null },
      billing_cycle_anchor: trialEnd ?? now,
      billing_cycle_anchor_config: null,
      billing_mode: { flexible: null, type: 'classic' },
      billing_schedules: [],
      billing_thresholds: null,
      cancel_at: null,
      cancel_at_period_end: false,
      canceled_at: null,
      cancellation_details: { comment: null, feedback: null, feedback_option: null, reason: null },
      collection_method: 'charge_automatically',
      created: now,
      currency: session.currency!,
      customer: customerId,
      customer_account: null,
      days_until_due: null,
      default_payment_method: id('pm'),
      default_source: null,
      default_tax_rates: plan.taxRates.map((r) => this.taxRates.get(r)!.rate),
      description: null,
      discounts: [],
      ended_at: null,
      invoice_settings: { account_tax_ids: null, custom_fields: null, description: null, footer: null, issuer: { type: 'self' } },
      items: { object: 'list', data: [item], has_more: false, url: `/v1/subscription_items?subscription=${subscriptionId}` },
      latest_invoice: null,
      livemode: false,
      managed_payments: null,
      metadata: plan.metadata,
      next_pending_invoice_item_invoice: null,
      on_behalf_of: null,
      pause_collection: null,
      payment_settings: null,
      pending_invoice_item_interval: null,
      pending_setup_intent: null,
      pending_update: null,
      schedule: null,
      start_date: now,
      status: trialEnd ? 'trialing' : 'active',
      test_clock: null,
      transfer_data: null,
      trial_end: trialEnd ?? null,
      trial_settings: plan.trialSettings ?? null,
      trial_start: trialEnd ? now : null,
    };
    void email;
    if (plan.couponId) {
      const found = this.coupons.get(plan.couponId)!;
      const discount: Stripe.Discount = {
        id: id('di'),
        object: 'discount',
        checkout_session: session.id,
        customer: customerId,
        customer_account: null,
        // A repeating coupon lasts duration_in_months from when it is applied (the subscription's start, its trial included).
        end: found.coupon.duration === 'repeating' ? stripePeriodEnd(now, 'month', found.coupon.duration_in_months!, 1) : null,
        invoice: null,
        invoice_item: null,
        promotion_code: null,
        source: { coupon: found.coupon, type: 'coupon' },
        start: now,
        subscription: subscriptionId,
        subscription_item: null,
      };
      this.discounts.set(discount.id, discount);
      subscription.discounts = [discount.id];
      this.coupons.set(found.coupon.id, { ...found, coupon: { ...found.coupon, times_redeemed: found.coupon.times_redeemed + 1 } });
    }
    this.subscriptions.set(subscriptionId, subscription);
    // A trial's first invoice is Stripe's $0 "Trial period for …" invoice, paid without a payment.
    const invoice = this.createInvoice(subscription, 'subscription_create', { start: now, end }, 'paid', trialEnd ? 0 : undefined, trialEnd ? `Trial period for ${plan.productName}` : undefined);
    this.setSubscription(subscriptionId, { latest_invoice: invoice.id });
    return { subscription: this.subscriptions.get(subscriptionId)!, invoice };
  }

  private createInvoice(
    sub: Stripe.Subscription,
    reason: Stripe.Invoice.BillingReason,
    period: { start: number; end: number },
    outcome: 'paid' | 'failed',
    /** Set: a proration line of this amount instead of the item's price for the period. */
    proratedAmount?: number,
    /** A trial's $0 line: its description, and the amount is 0 (not a proration). */
    trialDescription?: string,
    /** A draft (renewDraft): not finalized nor charged yet. */
    draft = false,
    /** False: `discounts: ''` at `POST /v1/invoices` (no discount inherited, nothing of a `once` coupon spent). */
    inheritDiscount = true,
  ): Stripe.Invoice {
    const item = sub.items.data[0]!;
    const amount = trialDescription ? 0 : (proratedAmount ?? (item.price.unit_amount ?? 0) * (item.quantity ?? 1));
    // The subscription's discount, while it lasts, off the item's line (not off a proration here).
    const invoiceId = id('in');
    const discount = (proratedAmount !== undefined && !trialDescription) || !inheritDiscount ? undefined : this.subscriptionDiscount(sub, invoiceId);
    const discountAmount = discount ? this.discountOff(discount.coupon, amount) : 0;
    const discountAmounts = discount ? [{ amount: discountAmount, discount: discount.id }] : [];
    // The subscription's default tax rates on the line (Stripe's tax on each invoice), on the discounted amount.
    const tax = this.taxFor(amount - discountAmount, invoiceTaxRates(sub));
    const lineTaxes: Stripe.InvoiceLineItem.Tax[] = tax.taxes.map((t) => ({
      amount: t.amount,
      tax_behavior: t.rate.inclusive ? 'inclusive' : 'exclusive',
      tax_rate_details: { tax_rate: t.rate.id },
      taxability_reason: 'standard_rated',
      taxable_amount: t.rate.inclusive ? t.taxable - t.amount : t.taxable,
      type: 'tax_rate_details',
    }));
    const due = amount - discountAmount + tax.added;
    const now = this.seconds();
    const line: Stripe.InvoiceLineItem = {
      id: id('il'),
      object: 'line_item',
      amount,
      currency: sub.currency,
      description: trialDescription ?? null,
      discount_amounts: discountAmounts,
      discountable: true,
      discounts: discount ? [discount.id] : [],
      invoice: invoiceId,
      livemode: false,
      metadata: {},
      parent: {
        invoice_item_details: null,
        subscription_item_details: { invoice_item: null, proration: proratedAmount !== undefined && !trialDescription, proration_details: null, subscription: sub.id, subscription_item: item.id },
        type: 'subscription_item_details',
      },
      period,
      pretax_credit_amounts: [],
      pricing: null,
      quantity: item.quantity ?? 1,
      quantity_decimal: Stripe.Decimal.from(item.quantity ?? 1),
      subscription: sub.id,
      subtotal: amount,
      taxes: lineTaxes,
    };
    const invoice: Stripe.Invoice = {
      id: invoiceId,
      object: 'invoice',
      account_country: 'US',
      account_name: 'Kassa test merchant',
      account_tax_ids: null,
      amount_due: due,
      amount_overpaid: 0,
      amount_paid: 0,
      amount_remaining: due,
      amount_shipping: 0,
      application: null,
      attempt_count: 0,
      attempted: false,
      auto_advance: draft,
      automatic_tax: { disabled_reason: null, enabled: false, liability: null, provider: null, status: null },
      automatically_finalizes_at: draft ? now + FakeStripe.FINALIZATION_GRACE_SECONDS : null,
      billing_reason: reason,
      collection_method: 'charge_automatically',
      created: now,
      currency: sub.currency,
      custom_fields: null,
      customer: sub.customer,
      customer_account: null,
      customer_address: null,
      customer_email: null,
      customer_name: null,
      customer_phone: null,
      customer_shipping: null,
      customer_tax_exempt: 'none',
      default_payment_method: null,
      default_source: null,
      // Stripe copies the subscription's default tax rates onto the invoices it makes for it.
      default_tax_rates: sub.default_tax_rates ?? [],
      description: null,
      discounts: discount ? [discount.id] : [],
      due_date: null,
      effective_at: now,
      ending_balance: 0,
      footer: null,
      from_invoice: null,
      issuer: { type: 'self' },
      last_finalization_error: null,
      latest_revision: null,
      lines: { object: 'list', data: [line], has_more: false, url: `/v1/invoices/${invoiceId}/lines` },
      livemode: false,
      metadata: {},
      next_payment_attempt: null,
      number: null,
      on_behalf_of: null,
      parent: { quote_details: null, subscription_details: { metadata: sub.metadata, subscription: sub.id }, type: 'subscription_details' },
      payment_settings: { default_mandate: null, payment_method_options: null, payment_method_types: null },
      payments: { object: 'list', data: [], has_more: false, url: `/v1/invoice_payments?invoice=${invoiceId}` },
      // Stripe's invoice-level period is the one before the line's (pending items); Kassa must read the line.
      period_end: period.start,
      period_start: period.start,
      post_payment_credit_notes_amount: 0,
      pre_payment_credit_notes_amount: 0,
      receipt_number: null,
      rendering: null,
      shipping_cost: null,
      shipping_details: null,
      starting_balance: 0,
      statement_descriptor: null,
      status: draft ? 'draft' : 'open',
      status_transitions: { finalized_at: draft ? null : now, marked_uncollectible_at: null, paid_at: null, voided_at: null },
      subtotal: amount,
      subtotal_excluding_tax: amount - tax.taxes.filter((t) => t.rate.inclusive).reduce((sum, t) => sum + t.amount, 0),
      test_clock: null,
      total: due,
      total_discount_amounts: discountAmounts,
      total_excluding_tax: due - tax.taxes.reduce((sum, t) => sum + t.amount, 0),
      total_pretax_credit_amounts: [],
      total_taxes: tax.taxes.map((t) => ({
        amount: t.amount,
        tax_behavior: t.rate.inclusive ? ('inclusive' as const) : ('exclusive' as const),
        tax_rate_details: { tax_rate: t.rate.id },
        taxability_reason: 'standard_rated' as const,
        taxable_amount: t.rate.inclusive ? t.taxable - t.amount : t.taxable,
        type: 'tax_rate_details' as const,
      })),
      webhooks_delivered_at: null,
    };
    this.invoices.set(invoiceId, invoice);
    if (draft) return invoice;
    const finalized = this.applyCustomerBalance(invoice);
    this.invoices.set(invoiceId, finalized);
    if (this.belowMinimumCharge(finalized)) return this.paidBelowMinimum(finalized);
    if (finalized.amount_due === 0) {
      // Stripe marks a $0 invoice paid at finalization: no PaymentIntent, no charge.
      const paid: Stripe.Invoice = { ...finalized, status: 'paid', status_transitions: { ...finalized.status_transitions, paid_at: now } };
      this.invoices.set(invoiceId, paid);
      return paid;
    }
    return this.settleInvoice(finalized, outcome);
  }

  /** One payment attempt of an open invoice: a PaymentIntent that succeeded or was declined. */
  private settleInvoice(invoice: Stripe.Invoice, outcome: 'paid' | 'failed'): Stripe.Invoice {
    const intent = this.createIntentFor(invoice.amount_due, invoice.currency, outcome === 'paid' ? 'succeeded' : 'requires_payment_method');
    // Each attempt is a charge on the customer's card, as Stripe makes for an invoice's PaymentIntent.
    this.createCharge(intent, invoice.customer_email ?? '', outcome === 'paid' ? 'succeeded' : 'failed');
    const now = this.seconds();
    const payment: Stripe.InvoicePayment = {
      id: id('inpay'),
      object: 'invoice_payment',
      amount_paid: outcome === 'paid' ? invoice.amount_due : null,
      amount_requested: invoice.amount_due,
      created: now,
      currency: invoice.currency,
      invoice: invoice.id,
      is_default: true,
      livemode: false,
      payment: { payment_intent: intent.id, type: 'payment_intent' },
      status: outcome === 'paid' ? 'paid' : 'open',
      status_transitions: { canceled_at: null, paid_at: outcome === 'paid' ? now : null },
    };
    const paid = outcome === 'paid';
    const next: Stripe.Invoice = {
      ...invoice,
      attempt_count: invoice.attempt_count + 1,
      attempted: true,
      status: paid ? 'paid' : 'open',
      amount_paid: paid ? invoice.amount_due : 0,
      amount_remaining: paid ? 0 : invoice.amount_due,
      payments: { ...invoice.payments!, data: [...invoice.payments!.data, payment] },
      status_transitions: { ...invoice.status_transitions, paid_at: paid ? now : null },
    };
    this.invoices.set(invoice.id, next);
    return next;
  }

  // ---- customer balances ----

  /**
   * The customer's balance applied to an invoice being finalized, as Stripe documents it
   * (`starting_balance`: the balance before; `ending_balance`: after; `amount_due`: "if there is
   * account credit that can be applied to the invoice, the amount_due may be 0"): a credit (below 0)
   * pays up to the invoice's total; a total below 0 is due 0 and its credit joins the balance; a
   * debt (above 0) is added to what is due. Each move is an `applied_to_invoice` transaction.
   */
  private applyCustomerBalance(invoice: Stripe.Invoice): Stripe.Invoice {
    const customer = invoice.customer as string;
    const starting = this.customerBalances.get(customer) ?? 0;
    let due = invoice.total;
    let ending = starting;
    if (invoice.total < 0) {
      due = 0;
      ending = starting + invoice.total;
    } else if (starting < 0) {
      const applied = Math.min(invoice.total, -starting);
      due = invoice.total - applied;
      ending = starting + applied;
    } else if (starting > 0) {
      due = invoice.total + starting;
      ending = 0;
    }
    if (ending !== starting) this.moveCustomerBalance(customer, ending - starting, 'applied_to_invoice', invoice);
    return { ...invoice, starting_balance: starting, ending_balance: ending, amount_due: due, amount_remaining: due };
  }

  /**
   * Stripe's minimum charge (docs.stripe.com/currencies, "Minimum and maximum charge amounts"; the
   * fake knows USD and EUR, 0.50 each): "If the amount due for the invoice is less than Stripe's
   * minimum allowed charge per currency, the invoice is automatically marked paid, and we add the
   * amount due to the customer's credit balance which is applied to the next invoice" (the invoice
   * object's reference). Modelled at finalization: the invoice is `paid` with `amount_paid` 0 and
   * `amount_remaining` 0 (its `amount_due` kept), no PaymentIntent; the amount due becomes a debit
   * (a customer balance transaction `invoice_too_small` of +amount_due, naming the invoice) made
   * after the balance was applied, so the invoice's `ending_balance` does not include it (Stripe
   * documents neither field for this case; its 2025-12-15 changelog points to listing the balance
   * transactions of an invoice to find such an adjustment). The next invoice starts from it
   * (`starting_balance` > 0) and its `amount_due` is its total + the debit.
   */
  private belowMinimumCharge(invoice: Stripe.Invoice): boolean {
    const minimum = ({ usd: 50, eur: 50 } as Record<string, number>)[invoice.currency];
    return this.minimumCharge && minimum !== undefined && invoice.amount_due > 0 && invoice.amount_due < minimum;
  }

  private paidBelowMinimum(invoice: Stripe.Invoice): Stripe.Invoice {
    this.moveCustomerBalance(invoice.customer as string, invoice.amount_due, 'invoice_too_small', invoice);
    const paid: Stripe.Invoice = { ...invoice, status: 'paid', amount_paid: 0, amount_remaining: 0, status_transitions: { ...invoice.status_transitions, paid_at: this.seconds() } };
    this.invoices.set(invoice.id, paid);
    return paid;
  }

  /** A voided invoice's balance move given back (`unapplied_from_invoice`). */
  private unapplyCustomerBalance(invoice: Stripe.Invoice): void {
    const move = (invoice.ending_balance ?? invoice.starting_balance) - invoice.starting_balance;
    if (move !== 0) this.moveCustomerBalance(invoice.customer as string, -move, 'unapplied_from_invoice', invoice);
  }

  private moveCustomerBalance(customer: string, amount: number, type: Stripe.CustomerBalanceTransaction.Type, invoice: Stripe.Invoice): void {
    const before = this.customerBalances.get(customer) ?? 0;
    const after = before + amount;
    this.customerBalances.set(customer, after);
    const transaction: Stripe.CustomerBalanceTransaction = {
      id: id('cbtxn'),
      object: 'customer_balance_transaction',
      amount,
      checkout_session: null,
      created: this.seconds(),
      credit_note: null,
      currency: invoice.currency,
      customer,
      customer_account: null,
      description: null,
      ending_balance: after,
      invoice: invoice.id,
      livemode: false,
      metadata: {},
      type,
    };
    this.balanceTransactions.set(customer, [...(this.balanceTransactions.get(customer) ?? []), transaction]);
  }

  /** A customer as `GET /v1/customers/:id` answers (one of a subscription's customers), with its balance. */
  private customer(customerId: string): Stripe.Customer | undefined {
    const sub = [...this.subscriptions.values()].find((x) => x.customer === customerId);
    if (!sub) return undefined;
    return {
      id: customerId,
      object: 'customer',
      balance: this.customerBalances.get(customerId) ?? 0,
      created: sub.created,
      currency: sub.currency,
      customer_account: null,
      default_source: null,
      description: null,
      email: null,
      invoice_settings: { custom_fields: null, default_payment_method: null, footer: null, rendering_options: null },
      livemode: false,
      metadata: {},
      shipping: null,
    };
  }

  // ---- invoices: drafts, invoice items, finalization ----

  /** `POST /v1/invoices`: a draft of the customer's subscription (Kassa's final usage invoice), no pending items. */
  private createDraftInvoice(params: Record<string, unknown>): { status: number; body: unknown } {
    const subscriptionId = params.subscription as string | undefined;
    const sub = subscriptionId ? this.subscriptions.get(subscriptionId) : undefined;
    if (!sub) return { status: 400, body: { error: { type: 'invalid_request_error', message: 'This fake opens invoices of a subscription only', param: 'subscription' } } };
    if (params.customer !== sub.customer) return { status: 400, body: { error: { type: 'invalid_request_error', message: 'The subscription belongs to another customer', param: 'customer' } } };
    const now = this.seconds();
    if (params.collection_method !== undefined && params.collection_method !== 'charge_automatically') return { status: 400, body: { error: { type: 'invalid_request_error', message: 'This fake opens charge_automatically invoices only', param: 'collection_method' } } };
    // `discounts` (Stripe's API reference): not given, the customer's discount is inherited (this
    // fake's customers hold none); '' inherits nothing; `discounts[0][discount]` reuses an existing
    // discount of the subscription (its end still applies). No subscription discount is spent here.
    const reused = params.discounts === undefined || params.discounts === '' ? [] : Object.values(params.discounts as Record<string, { discount?: string }>).map((d) => d.discount);
    if (reused.some((d) => !d || !sub.discounts.includes(d))) return { status: 400, body: { error: { type: 'invalid_request_error', message: 'This fake reuses discounts of the invoice\'s subscription only', param: 'discounts' } } };
    const defaultRates = (params.default_tax_rates === undefined || params.default_tax_rates === '' ? [] : Object.values(params.default_tax_rates as Record<string, string>)).map((r) => this.taxRates.get(r)?.rate);
    if (defaultRates.some((r) => !r)) return { status: 400, body: { error: { type: 'invalid_request_error', message: 'No such tax rate', param: 'default_tax_rates' } } };
    const base = this.createInvoice(sub, 'manual', { start: now, end: now }, 'paid', 0, undefined, true, false);
    const invoice: Stripe.Invoice = {
      ...base,
      // An invoice opened by POST /v1/invoices has only the tax rates and discounts it is given
      // (Stripe documents copying the subscription's defaults for the invoices the subscription makes).
      default_tax_rates: defaultRates as Stripe.TaxRate[],
      discounts: reused as string[],
      auto_advance: params.auto_advance === 'true',
      automatically_finalizes_at: params.auto_advance === 'true' ? now + FakeStripe.FINALIZATION_GRACE_SECONDS : null,
      metadata: (params.metadata as Record<string, string> | undefined) ?? {},
      lines: { ...base.lines, data: [] },
      amount_due: 0,
      amount_remaining: 0,
      subtotal: 0,
      subtotal_excluding_tax: 0,
      total: 0,
      total_excluding_tax: 0,
    };
    this.invoices.set(invoice.id, invoice);
    this.record('invoice.created', invoice);
    return { status: 200, body: invoice };
  }

  private updateInvoice(invoiceId: string, params: Record<string, unknown>): { status: number; body: unknown } {
    const invoice = this.invoices.get(invoiceId);
    if (!invoice) return { status: 404, body: missingObject('invoice', invoiceId) };
    if (invoice.status !== 'draft' && invoice.status !== 'open') {
      return { status: 400, body: { error: { type: 'invalid_request_error', message: `You can only update auto_advance on draft or open invoices (this one is ${invoice.status}).`, param: 'auto_advance' } } };
    }
    const next: Stripe.Invoice = { ...invoice, ...(params.auto_advance !== undefined && { auto_advance: params.auto_advance === 'true' }) };
    this.invoices.set(invoiceId, next);
    return { status: 200, body: next };
  }

  /** `POST /v1/invoiceitems` with `invoice`: a line on that draft (Stripe refuses a finalized invoice). */
  private createInvoiceItem(params: Record<string, unknown>): { status: number; body: unknown } {
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    const invoice = this.invoices.get(String(params.invoice));
    if (!invoice) return invalid('This fake adds invoice items to a given invoice only', 'invoice');
    if (invoice.status !== 'draft') return invalid(`You can only add invoice items to draft invoices (${invoice.id} is ${invoice.status}).`, 'invoice');
    if (params.customer !== invoice.customer) return invalid('The invoice item and the invoice must have the same customer', 'customer');
    const amount = Number(params.amount);
    if (!Number.isSafeInteger(amount)) return invalid('amount must be an integer', 'amount');
    if (params.currency !== invoice.currency) return invalid(`The currency must be the invoice's (${invoice.currency})`, 'currency');
    const period = params.period as { start?: string; end?: string } | undefined;
    // Stripe: "Defaults to false for prorations or negative invoice items, and true for all other invoice items."
    const discountable = params.discountable === undefined ? amount >= 0 : params.discountable === 'true';
    const taxRateIds = params.tax_rates === undefined || params.tax_rates === '' ? [] : Object.values(params.tax_rates as Record<string, string>);
    const unknownRate = taxRateIds.find((r) => !this.taxRates.has(r));
    if (unknownRate) return { status: 400, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such tax rate: '${unknownRate}'`, param: 'tax_rates' } } };
    const now = this.seconds();
    const item: Stripe.InvoiceItem = {
      id: id('ii'),
      object: 'invoiceitem',
      amount,
      currency: invoice.currency,
      customer: invoice.customer as string,
      customer_account: null,
      date: now,
      description: (params.description as string | undefined) ?? null,
      discountable,
      discounts: [],
      invoice: invoice.id,
      livemode: false,
      metadata: (params.metadata as Record<string, string> | undefined) ?? {},
      parent: null,
      period: { start: Number(period?.start ?? now), end: Number(period?.end ?? now) },
      pricing: null,
      proration: false,
      quantity: 1,
      quantity_decimal: Stripe.Decimal.from(1),
      // "The tax rates which apply to the invoice item. When set, the default_tax_rates on the invoice do not apply to this invoice item."
      tax_rates: taxRateIds.map((r) => this.taxRates.get(r)!.rate),
      test_clock: null,
    };
    this.invoiceItems.set(item.id, item);
    const line: Stripe.InvoiceLineItem = {
      id: id('il'),
      object: 'line_item',
      amount,
      currency: invoice.currency,
      description: item.description,
      discount_amounts: [],
      discountable,
      discounts: [],
      invoice: invoice.id,
      livemode: false,
      // An invoice item's line carries the item's metadata, as Stripe's do.
      metadata: item.metadata ?? {},
      parent: { invoice_item_details: { invoice_item: item.id, proration: false, proration_details: null, subscription: null }, subscription_item_details: null, type: 'invoice_item_details' },
      period: item.period,
      pretax_credit_amounts: [],
      pricing: null,
      quantity: 1,
      quantity_decimal: Stripe.Decimal.from(1),
      subscription: null,
      subtotal: amount,
      taxes: [],
    };
    this.invoices.set(invoice.id, this.withDiscounts({ ...invoice, lines: { ...invoice.lines, data: [...invoice.lines.data, line] } }));
    return { status: 200, body: item };
  }

  /**
   * A draft's amounts after its lines changed, as Stripe recomputes them: the invoice's discount
   * (the subscription's, recorded in `invoice.discounts` when the draft was made) spread over the
   * discountable lines of a positive amount (`discountAllocation`), each line's `discount_amounts`,
   * the subscription line's tax on its discounted amount, `total_discount_amounts` and the totals.
   */
  private withDiscounts(invoice: Stripe.Invoice): Stripe.Invoice {
    const discountId = invoice.discounts.find((d): d is string => typeof d === 'string');
    const discount = discountId ? this.discounts.get(discountId) : undefined;
    const coupon = discount ? this.coupons.get((discount.source.coupon as Stripe.Coupon).id)!.coupon : undefined;
    const eligible = invoice.lines.data.map((l) => l.discountable && l.amount > 0 && (l.parent?.subscription_item_details?.proration ?? false) === false);
    const shares = coupon ? this.allocate(coupon, invoice.lines.data.map((l, i) => (eligible[i] ? l.amount : 0))) : invoice.lines.data.map(() => 0);
    const sub = invoice.parent?.subscription_details?.subscription ? this.subscriptions.get(invoice.parent.subscription_details.subscription as string) : undefined;
    const idsOf = (rates: readonly (string | Stripe.TaxRate)[] | null | undefined) => (rates ?? []).map((r) => (typeof r === 'string' ? r : r.id));
    // Each line's rates (Stripe): the subscription line the item's or the subscription's; an invoice
    // item its own `tax_rates`, else the invoice's `default_tax_rates`.
    const ratesOf = (l: Stripe.InvoiceLineItem): string[] => {
      if (l.parent?.subscription_item_details) return sub ? invoiceTaxRates(sub) : [];
      const itemId = l.parent?.invoice_item_details?.invoice_item;
      const own = idsOf(itemId ? this.invoiceItems.get(itemId)?.tax_rates : []);
      return own.length > 0 ? own : idsOf(invoice.default_tax_rates);
    };
    let added = 0;
    let inclusive = 0;
    const totalTaxes = new Map<string, { amount: number; taxable: number; inclusive: boolean }>();
    const lines = invoice.lines.data.map((l, i) => {
      const off = shares[i]!;
      // Tax per line on its discounted amount, each rate rounded on the line (a credit's tax negative).
      const sign = l.amount - off < 0 ? -1 : 1;
      const own = this.taxFor(Math.abs(l.amount - off), ratesOf(l));
      const tax = { added: sign * own.added, taxes: own.taxes.map((t) => ({ ...t, amount: sign * t.amount, taxable: sign * t.taxable })) };
      added += tax.added;
      for (const t of tax.taxes) {
        if (t.rate.inclusive) inclusive += t.amount;
        const seen = totalTaxes.get(t.rate.id) ?? { amount: 0, taxable: 0, inclusive: t.rate.inclusive };
        totalTaxes.set(t.rate.id, { ...seen, amount: seen.amount + t.amount, taxable: seen.taxable + (t.rate.inclusive ? t.taxable - t.amount : t.taxable) });
      }
      return {
        ...l,
        discount_amounts: discount && eligible[i] ? [{ amount: off, discount: discount.id }] : [],
        discounts: discount && eligible[i] ? [discount.id] : [],
        taxes: tax.taxes.map((t) => ({
          amount: t.amount,
          tax_behavior: t.rate.inclusive ? ('inclusive' as const) : ('exclusive' as const),
          tax_rate_details: { tax_rate: t.rate.id },
          taxability_reason: 'standard_rated' as const,
          taxable_amount: t.rate.inclusive ? t.taxable - t.amount : t.taxable,
          type: 'tax_rate_details' as const,
        })),
      };
    });
    const subtotal = lines.reduce((sum, l) => sum + l.amount, 0);
    const off = shares.reduce((sum, x) => sum + x, 0);
    const total = subtotal - off + added;
    const taxSum = [...totalTaxes.values()].reduce((sum, t) => sum + t.amount, 0);
    return {
      ...invoice,
      lines: { ...invoice.lines, data: lines },
      amount_due: total,
      amount_remaining: total,
      subtotal,
      subtotal_excluding_tax: subtotal - inclusive,
      total,
      total_excluding_tax: total - taxSum,
      total_discount_amounts: discount ? [{ amount: off, discount: discount.id }] : [],
      total_taxes: [...totalTaxes.entries()].map(([rate, t]) => ({
        amount: t.amount,
        tax_behavior: t.inclusive ? ('inclusive' as const) : ('exclusive' as const),
        tax_rate_details: { tax_rate: rate },
        taxability_reason: 'standard_rated' as const,
        taxable_amount: t.taxable,
        type: 'tax_rate_details' as const,
      })),
    };
  }

  /** Each line's share of a coupon (`discountAllocation`); 0 for lines of amount 0 (not discountable). */
  allocate(coupon: Stripe.Coupon, amounts: readonly number[]): number[] {
    const base = amounts.reduce((sum, a) => sum + a, 0);
    if (base <= 0) return amounts.map(() => 0);
    if (coupon.percent_off !== null && this.discountAllocation === 'per-line') return amounts.map((a) => this.discountOff(coupon, a));
    const total = this.discountOff(coupon, base);
    // Largest remainder: floor of each proportional share, the cents left to the largest fractions (earlier line on a tie).
    const exact = amounts.map((a) => ({ floor: Math.floor((total * a) / base), rest: (total * a) % base }));
    let left = total - exact.reduce((sum, e) => sum + e.floor, 0);
    const order = exact.map((e, i) => ({ ...e, i })).sort((x, y) => y.rest - x.rest || x.i - y.i);
    const shares = exact.map((e) => e.floor);
    for (const e of order) {
      if (left === 0) break;
      if (amounts[e.i]! > 0) {
        shares[e.i] = shares[e.i]! + 1;
        left--;
      }
    }
    return shares;
  }

  /** `POST /v1/invoices/:id/finalize`: the draft is open, and charged at once when it may advance. */
  private finalizeInvoice(invoiceId: string, params: Record<string, unknown>): { status: number; body: unknown } {
    const invoice = this.invoices.get(invoiceId);
    if (!invoice) return { status: 404, body: missingObject('invoice', invoiceId) };
    if (invoice.status !== 'draft') return { status: 400, body: { error: { type: 'invalid_request_error', code: 'invoice_not_editable', message: `This invoice is already finalized (${invoice.status}).` } } };
    const advance = params.auto_advance === undefined ? invoice.auto_advance === true : params.auto_advance === 'true';
    this.finalizeAndCharge(invoiceId, advance);
    return { status: 200, body: this.invoices.get(invoiceId) };
  }

  /** Finalizes a draft (`invoice.finalized`) and, when it may advance, charges it (`invoice.paid` / `invoice.payment_failed`). */
  private finalizeAndCharge(invoiceId: string, advance: boolean): Stripe.Invoice {
    const now = this.seconds();
    const draft = this.invoices.get(invoiceId)!;
    const open: Stripe.Invoice = this.applyCustomerBalance({ ...draft, status: 'open', auto_advance: advance, automatically_finalizes_at: null, status_transitions: { ...draft.status_transitions, finalized_at: now } });
    this.invoices.set(invoiceId, open);
    this.record('invoice.finalized', open);
    if (this.belowMinimumCharge(open)) {
      const paid = this.paidBelowMinimum(open);
      this.record('invoice.paid', paid);
      return paid;
    }
    if (!advance && open.amount_due !== 0) return open;
    if (open.amount_due === 0) {
      const paid: Stripe.Invoice = { ...open, status: 'paid', status_transitions: { ...open.status_transitions, paid_at: now } };
      this.invoices.set(invoiceId, paid);
      this.record('invoice.paid', paid);
      return paid;
    }
    const settled = this.settleInvoice(open, this.finalizeOutcome);
    const subscriptionId = settled.parent?.subscription_details?.subscription as string | undefined;
    if (subscriptionId && this.subscriptions.get(subscriptionId)?.status !== 'canceled') this.setSubscription(subscriptionId, { status: this.finalizeOutcome === 'paid' ? 'active' : 'past_due' });
    this.record(this.finalizeOutcome === 'paid' ? 'invoice.paid' : 'invoice.payment_failed', settled);
    return settled;
  }

  /**
   * `POST /v1/invoices/:id/pay`: one payment attempt now (a draft is finalized first, as Stripe
   * does). Paid: `invoice.paid`. Declined (`finalizeOutcome`): Stripe's 402 card_error, the invoice
   * stays open with the failed attempt (`invoice.payment_failed`). Already paid or void: 400.
   */
  private payInvoice(invoiceId: string): { status: number; body: unknown } {
    let invoice = this.invoices.get(invoiceId);
    if (!invoice) return { status: 404, body: missingObject('invoice', invoiceId) };
    if (invoice.status === 'draft') invoice = this.finalizeAndCharge(invoiceId, false);
    if (invoice.status === 'paid') return { status: 400, body: { error: { type: 'invalid_request_error', code: 'invoice_already_paid', message: 'Invoice is already paid' } } };
    if (invoice.status !== 'open') return { status: 400, body: { error: { type: 'invalid_request_error', code: 'invoice_not_editable', message: `You can only pay an open invoice (this one is ${invoice.status}).` } } };
    const settled = this.settleInvoice(invoice, this.finalizeOutcome);
    this.record(this.finalizeOutcome === 'paid' ? 'invoice.paid' : 'invoice.payment_failed', settled);
    if (this.finalizeOutcome !== 'paid') return { status: 402, body: { error: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' } } };
    return { status: 200, body: settled };
  }

  /** `POST /v1/invoices/:id/void`: an open (or uncollectible) invoice is void, never collected. */
  private voidInvoice(invoiceId: string): { status: number; body: unknown } {
    const invoice = this.invoices.get(invoiceId);
    if (!invoice) return { status: 404, body: missingObject('invoice', invoiceId) };
    if (invoice.status !== 'open' && invoice.status !== 'uncollectible') return { status: 400, body: { error: { type: 'invalid_request_error', message: `You can only void an open or uncollectible invoice (this one is ${invoice.status}).` } } };
    this.unapplyCustomerBalance(invoice);
    const voided: Stripe.Invoice = { ...invoice, status: 'void', amount_remaining: 0, status_transitions: { ...invoice.status_transitions, voided_at: this.seconds() } };
    this.invoices.set(invoiceId, voided);
    this.record('invoice.voided', voided);
    return { status: 200, body: voided };
  }

  /** `DELETE /v1/invoices/:id`: only a draft can be deleted. */
  private deleteDraftInvoice(invoiceId: string): { status: number; body: unknown } {
    const invoice = this.invoices.get(invoiceId);
    if (!invoice) return { status: 404, body: missingObject('invoice', invoiceId) };
    if (invoice.status !== 'draft') return { status: 400, body: { error: { type: 'invalid_request_error', message: 'You can only delete draft invoices.' } } };
    this.invoices.delete(invoiceId);
    return { status: 200, body: { id: invoiceId, object: 'invoice', deleted: true } };
  }

  private updateSubscription(subscriptionId: string, params: Record<string, unknown>): { status: number; body: unknown } {
    const sub = this.subscriptions.get(subscriptionId);
    if (!sub) return { status: 404, body: missingObject('subscription', subscriptionId) };
    if (sub.status === 'canceled') {
      return { status: 400, body: { error: { type: 'invalid_request_error', message: 'A canceled subscription can only update its cancellation_details and metadata.' } } };
    }
    const changes: Partial<Stripe.Subscription> = {};
    if (params.cancel_at_period_end !== undefined) {
      const on = params.cancel_at_period_end === 'true';
      Object.assign(changes, { cancel_at_period_end: on, canceled_at: on ? this.seconds() : null, cancel_at: on ? sub.items.data[0]!.current_period_end : null });
    }
    if (params.pause_collection !== undefined) {
      const pause = params.pause_collection as '' | { behavior?: string };
      changes.pause_collection = pause === '' ? null : { behavior: (pause.behavior ?? 'void') as Stripe.Subscription.PauseCollection.Behavior, resumes_at: null };
    }
    if (params.items !== undefined) return this.updateItems(sub, params, changes);
    return { status: 200, body: this.setSubscription(subscriptionId, changes) };
  }

  /** `POST /v1/prices`: a recurring price of a product (the Dashboard's "Add another price"), active. */
  private createPrice(params: Record<string, unknown>): { status: number; body: unknown } {
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    const product = params.product as string | undefined;
    if (!product || !this.products.has(product)) return invalid(`No such product: '${product}'`, 'product');
    const unitAmount = Number(params.unit_amount);
    if (!Number.isSafeInteger(unitAmount) || unitAmount < 0) return invalid('unit_amount must be a non-negative integer', 'unit_amount');
    const recurring = params.recurring as { interval?: string; interval_count?: string } | undefined;
    if (!recurring?.interval) return invalid('This fake makes recurring prices only', 'recurring');
    const now = this.seconds();
    const price: Stripe.Price = {
      id: id('price'),
      object: 'price',
      active: true,
      billing_scheme: 'per_unit',
      created: now,
      currency: String(params.currency),
      custom_unit_amount: null,
      livemode: false,
      lookup_key: null,
      metadata: (params.metadata as Record<string, string> | undefined) ?? {},
      nickname: null,
      product,
      recurring: { interval: recurring.interval as Stripe.Price.Recurring.Interval, interval_count: Number(recurring.interval_count ?? 1), meter: null, trial_period_days: null, usage_type: 'licensed' },
      tax_behavior: 'unspecified',
      tiers_mode: null,
      transform_quantity: null,
      type: 'recurring',
      unit_amount: unitAmount,
      unit_amount_decimal: Stripe.Decimal.from(unitAmount),
    };
    this.prices.set(price.id, price);
    return { status: 200, body: price };
  }

  /** `POST /v1/products`: a product (name, metadata). */
  private createProduct(params: Record<string, unknown>): { status: number; body: unknown } {
    if (typeof params.name !== 'string' || params.name === '') return { status: 400, body: { error: { type: 'invalid_request_error', message: 'Missing required param: name.', param: 'name' } } };
    const product = this.product(id('prod'), params.name, (params.metadata as Record<string, string> | undefined) ?? {});
    this.products.set(product.id, product);
    return { status: 200, body: product };
  }

  private product(productId: string, name: string, metadata: Record<string, string>): Stripe.Product {
    const now = this.seconds();
    return {
      id: productId,
      object: 'product',
      active: true,
      created: now,
      description: null,
      images: [],
      livemode: false,
      marketing_features: [],
      metadata,
      name,
      package_dimensions: null,
      shippable: null,
      tax_details: null,
      type: 'service',
      updated: now,
      url: null,
    };
  }

  /** Every subscription update Stripe made with `items` (a plan or seat change), in order, with the invoice it made now (if any). */
  readonly itemUpdates: { subscriptionId: string; prorationBehavior: string; prorationDate: number; invoiceId: string | null }[] = [];

  /**
   * `POST /v1/subscriptions/:id` with `items[0][id]` (the one item) and its new `price` /
   * `price_data` and/or `quantity`, as Stripe Billing applies it:
   * - `proration_behavior` `none`: the item changes, nothing is prorated; the next renewal bills it.
   * - `always_invoice`: prorated at `proration_date` (default now; it must fall in the current
   *   period and not in the future) to the second over the current period: a credit line
   *   "Unused time on [q × ]<old product> after <date>" of −old amount × remaining / period and a
   *   line "Remaining time on [q × ]<new product> after <date>" of new amount × remaining / period,
   *   each rounded on its own to the minor unit (half away from zero: Stripe does not document
   *   its rounding mode; one rounding per line is what its invoices show), the subscription's
   *   default tax rates on each line (each rate rounded on its line), a discount the subscription
   *   holds now reflected in both lines' amounts (the discounted period amount prorated). The invoice (`subscription_update`) is finalized and charged
   *   at once. With `payment_behavior: error_if_incomplete` a declined charge (`finalizeOutcome`)
   *   is a 402 card_error and nothing changes (no invoice kept).
   * - `create_prorations` (pending invoice items for the next invoice) is not modelled: 400.
   * Changing the billing interval (Stripe would reset the cycle) is not modelled either: 400.
   */
  private updateItems(sub: Stripe.Subscription, params: Record<string, unknown>, changes: Partial<Stripe.Subscription>): { status: number; body: unknown } {
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    const list = Object.values(params.items as Record<string, Record<string, unknown>>);
    const item = sub.items.data[0]!;
    if (list.length !== 1 || list[0]!.id !== item.id) return invalid('This fake changes the subscription’s one item, named by items[0][id]', 'items');
    const given = list[0]!;
    const behavior = (params.proration_behavior as string | undefined) ?? 'create_prorations';
    if (behavior !== 'none' && behavior !== 'always_invoice') return invalid(`This fake models proration_behavior none and always_invoice, not ${behavior}`, 'proration_behavior');
    const now = this.seconds();
    let price = item.price;
    if (given.price_data !== undefined) {
      const data = given.price_data as { currency?: string; product?: string; unit_amount?: string; recurring?: { interval?: string; interval_count?: string } };
      if (!data.product || !this.products.has(data.product)) return invalid(`No such product: '${data.product}'`, 'items[0][price_data][product]');
      if (data.currency !== sub.currency) return invalid(`The price's currency must be the subscription's (${sub.currency})`, 'items[0][price_data][currency]');
      const interval = data.recurring?.interval as Stripe.Price.Recurring.Interval | undefined;
      const count = Number(data.recurring?.interval_count ?? 1);
      if (interval !== item.price.recurring!.interval || count !== item.price.recurring!.interval_count) return invalid('This fake does not change the billing interval', 'items[0][price_data][recurring]');
      const unitAmount = Number(data.unit_amount);
      if (!Number.isSafeInteger(unitAmount) || unitAmount < 0) return invalid('unit_amount must be a non-negative integer', 'items[0][price_data][unit_amount]');
      price = { ...item.price, id: id('price'), created: now, active: false, product: data.product, unit_amount: unitAmount, unit_amount_decimal: Stripe.Decimal.from(unitAmount) };
      this.prices.set(price.id, price);
    } else if (given.price !== undefined && given.price !== item.price.id) {
      // Another existing price (the Dashboard's price picker): it must exist and be active (Stripe
      // refuses archived prices, which inline `price_data` prices are) and bill on the same interval.
      const chosen = this.prices.get(given.price as string);
      if (!chosen) return { status: 400, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such price: '${given.price}'`, param: 'items[0][price]' } } };
      if (!chosen.active) return invalid('The price specified is inactive. This field only accepts active prices.', 'items[0][price]');
      if (chosen.currency !== sub.currency) return invalid(`The price's currency must be the subscription's (${sub.currency})`, 'items[0][price]');
      if (chosen.recurring?.interval !== item.price.recurring!.interval || chosen.recurring?.interval_count !== item.price.recurring!.interval_count) return invalid('This fake does not change the billing interval', 'items[0][price]');
      price = chosen;
    }
    const quantity = given.quantity === undefined ? (item.quantity ?? 1) : Number(given.quantity);
    if (!Number.isSafeInteger(quantity) || quantity < 1) return invalid('quantity must be a positive integer', 'items[0][quantity]');
    const plan: Stripe.Plan = { ...item.plan, id: price.id, amount: price.unit_amount, amount_decimal: price.unit_amount_decimal, product: price.product };
    const newItem: Stripe.SubscriptionItem = { ...item, price, plan, quantity };
    const moved: Stripe.Subscription = { ...sub, ...changes, items: { ...sub.items, data: [newItem] } };
    // Stripe's `previous_attributes` of the update: the items as they were (and the latest invoice, when one is made).
    const previous = { items: JSON.parse(JSON.stringify(sub.items)) as Stripe.ApiList<Stripe.SubscriptionItem> };
    if (behavior === 'none') {
      this.subscriptions.set(sub.id, moved);
      this.itemUpdates.push({ subscriptionId: sub.id, prorationBehavior: behavior, prorationDate: now, invoiceId: null });
      this.record('customer.subscription.updated', moved, previous);
      return { status: 200, body: moved };
    }
    const at = params.proration_date === undefined ? now : Number(params.proration_date);
    if (!Number.isSafeInteger(at) || at > now || at < item.current_period_start || at >= item.current_period_end) {
      return invalid('proration_date must be within the current billing period and not in the future', 'proration_date');
    }
    const length = BigInt(item.current_period_end - item.current_period_start);
    const remaining = BigInt(item.current_period_end - at);
    // amount × remaining / length to the nearest integer, half away from zero.
    const prorated = (amount: bigint) => {
      const n = amount * remaining;
      const sign = n < 0n ? -1n : 1n;
      const abs = n * sign;
      return Number(sign * ((2n * abs + length) / (2n * length)));
    };
    // Stripe's proration items are not discountable: a discount the subscription holds now is
    // reflected in their amounts (the discounted period amount, prorated), not in discount_amounts.
    const active = this.activeDiscount(sub);
    const discounted = (amount: bigint) => (active ? amount - BigInt(this.discountOff(active.coupon, Number(amount))) : amount);
    const nameOf = (p: Stripe.Price, q: number) => `${q > 1 ? `${q} × ` : ''}${this.products.get(p.product as string)?.name ?? 'item'}`;
    const after = new Date(at * 1000).toLocaleDateString('en-GB', { day: '2-digit', month: 'short', year: 'numeric', timeZone: 'UTC' });
    const lines = [
      { amount: prorated(-discounted(BigInt(item.price.unit_amount ?? 0) * BigInt(item.quantity ?? 1))), description: `Unused time on ${nameOf(item.price, item.quantity ?? 1)} after ${after}`, quantity: item.quantity ?? 1, price: item.price },
      { amount: prorated(discounted(BigInt(price.unit_amount ?? 0) * BigInt(quantity))), description: `Remaining time on ${nameOf(price, quantity)} after ${after}`, quantity, price },
    ];
    const invoice = this.prorationInvoice(moved, lines, { start: at, end: item.current_period_end });
    if (params.payment_behavior === 'error_if_incomplete' && invoice.amount_due > 0 && this.finalizeOutcome === 'failed') {
      this.invoices.delete(invoice.id);
      return { status: 402, body: { error: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' } } };
    }
    this.subscriptions.set(sub.id, { ...moved, latest_invoice: invoice.id });
    this.record('invoice.created', invoice);
    const settled = this.finalizeAndCharge(invoice.id, true);
    this.itemUpdates.push({ subscriptionId: sub.id, prorationBehavior: behavior, prorationDate: at, invoiceId: settled.id });
    const updated = this.mustGetSubscription(sub.id);
    this.record('customer.subscription.updated', updated, { ...previous, latest_invoice: sub.latest_invoice });
    return { status: 200, body: updated };
  }

  /** A draft `subscription_update` invoice of proration lines (each with the subscription's default tax rates). */
  private prorationInvoice(sub: Stripe.Subscription, lines: { amount: number; description: string; quantity: number; price: Stripe.Price }[], period: { start: number; end: number }): Stripe.Invoice {
    const base = this.createInvoice(sub, 'subscription_update', period, 'paid', 0, undefined, true);
    const rateIds = invoiceTaxRates(sub);
    let added = 0;
    let inclusiveTax = 0;
    const item = sub.items.data[0]!;
    const invoiceLines: Stripe.InvoiceLineItem[] = lines.map((l) => {
      // Tax of a credit is the negative of the tax of its absolute amount.
      const sign = l.amount < 0 ? -1 : 1;
      const tax = this.taxFor(Math.abs(l.amount), rateIds);
      added += sign * tax.added;
      inclusiveTax += sign * tax.taxes.filter((t) => t.rate.inclusive).reduce((sum, t) => sum + t.amount, 0);
      return {
        ...base.lines.data[0]!,
        id: id('il'),
        amount: l.amount,
        description: l.description,
        discount_amounts: [],
        discountable: false,
        discounts: [],
        parent: {
          invoice_item_details: null,
          subscription_item_details: { invoice_item: id('ii'), proration: true, proration_details: null, subscription: sub.id, subscription_item: item.id },
          type: 'subscription_item_details',
        },
        period,
        quantity: l.quantity,
        quantity_decimal: Stripe.Decimal.from(l.quantity),
        subtotal: l.amount,
        taxes: tax.taxes.map((t) => ({
          amount: sign * t.amount,
          tax_behavior: t.rate.inclusive ? ('inclusive' as const) : ('exclusive' as const),
          tax_rate_details: { tax_rate: t.rate.id },
          taxability_reason: 'standard_rated' as const,
          taxable_amount: sign * (t.rate.inclusive ? t.taxable - t.amount : t.taxable),
          type: 'tax_rate_details' as const,
        })),
      };
    });
    const subtotal = lines.reduce((sum, l) => sum + l.amount, 0);
    const due = subtotal + added;
    // The invoice's tax per rate: the sum of its lines' (each rounded on its line).
    const totalTaxes = rateIds.map((rateId) => {
      const of = invoiceLines.flatMap((l) => (l.taxes ?? []).filter((t) => t.tax_rate_details?.tax_rate === rateId));
      return { ...of[0]!, amount: of.reduce((sum, t) => sum + t.amount, 0), taxable_amount: of.reduce((sum, t) => sum + (t.taxable_amount ?? 0), 0) };
    });
    const invoice: Stripe.Invoice = {
      ...base,
      auto_advance: true,
      automatically_finalizes_at: null,
      lines: { ...base.lines, data: invoiceLines },
      amount_due: due,
      amount_remaining: due,
      subtotal,
      subtotal_excluding_tax: subtotal - inclusiveTax,
      total: due,
      total_excluding_tax: subtotal - inclusiveTax,
      discounts: [],
      total_discount_amounts: [],
      total_taxes: totalTaxes,
    };
    this.invoices.set(invoice.id, invoice);
    return invoice;
  }

  private endSubscription(subscriptionId: string, reason: Stripe.Subscription.CancellationDetails.Reason, endedAt = this.seconds()): Stripe.Subscription {
    const sub = this.mustGetSubscription(subscriptionId);
    return this.setSubscription(subscriptionId, {
      status: 'canceled',
      canceled_at: sub.canceled_at ?? this.seconds(),
      ended_at: endedAt,
      cancellation_details: { ...sub.cancellation_details!, reason },
    });
  }

  private periodIndex(sub: Stripe.Subscription): number {
    const item = sub.items.data[0]!;
    const { interval, interval_count } = item.price.recurring!;
    let n = 0;
    while (stripePeriodEnd(sub.billing_cycle_anchor, interval, interval_count, n) < item.current_period_start) n++;
    return n;
  }

  private setSubscription(subscriptionId: string, changes: Partial<Stripe.Subscription>): Stripe.Subscription {
    const next = { ...this.mustGetSubscription(subscriptionId), ...changes };
    this.subscriptions.set(subscriptionId, next);
    return next;
  }

  private mustGetSubscription(subscriptionId: string): Stripe.Subscription {
    const sub = this.subscriptions.get(subscriptionId);
    if (!sub) throw new Error(`no Subscription ${subscriptionId}`);
    return sub;
  }

  /**
   * The subscription's discount for an invoice created now, if it still applies: `forever`, a
   * `repeating` one before its `end`, a `once` one on its first invoice only (then it ends, and is
   * no longer the subscription's, as Stripe removes it).
   */
  private subscriptionDiscount(sub: Stripe.Subscription, invoiceId: string): { id: string; coupon: Stripe.Coupon } | undefined {
    const discountId = sub.discounts.find((d): d is string => typeof d === 'string');
    const discount = discountId ? this.discounts.get(discountId) : undefined;
    if (!discount) return undefined;
    const coupon = this.coupons.get((discount.source.coupon as Stripe.Coupon).id)!.coupon;
    const now = this.seconds();
    if (discount.end !== null && now >= discount.end) return undefined;
    if (coupon.duration === 'once') {
      this.discounts.set(discount.id, { ...discount, end: now, invoice: invoiceId });
      this.subscriptions.set(sub.id, { ...this.subscriptions.get(sub.id)!, discounts: [] });
    }
    return { id: discount.id, coupon };
  }

  /**
   * The subscription's discount now, without spending it (a `once` discount is no longer the
   * subscription's after its first invoice; a `repeating` one ends at its `end`).
   */
  private activeDiscount(sub: Stripe.Subscription): { id: string; coupon: Stripe.Coupon } | undefined {
    const discountId = sub.discounts.find((d): d is string => typeof d === 'string');
    const discount = discountId ? this.discounts.get(discountId) : undefined;
    if (!discount || (discount.end !== null && this.seconds() >= discount.end)) return undefined;
    return { id: discount.id, coupon: this.coupons.get((discount.source.coupon as Stripe.Coupon).id)!.coupon };
  }

  /** What a coupon takes off an amount: percent off rounded half up to the minor unit, or amount off at most the amount. */
  discountOff(coupon: Stripe.Coupon, amount: number): number {
    if (amount <= 0) return 0;
    if (coupon.amount_off !== null) return Math.min(coupon.amount_off, amount);
    const [w, f = ''] = this.coupons.get(coupon.id)!.percent!.split('.');
    const scaled = BigInt(w!) * 100n + BigInt((f + '00').slice(0, 2));
    return Number((2n * BigInt(amount) * scaled + 10000n) / 20000n);
  }

  private createCoupon(params: Record<string, unknown>): { status: number; body: unknown } {
    const p = params as { id?: string; name?: string; percent_off?: string; amount_off?: string; currency?: string; duration?: string; duration_in_months?: string; metadata?: Record<string, string> };
    const invalid = (message: string, param: string, code?: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param, ...(code && { code }) } } });
    if (p.id && this.coupons.has(p.id)) return invalid('Coupon already exists.', 'id', 'resource_already_exists');
    if ((p.percent_off === undefined) === (p.amount_off === undefined)) return invalid('You must pass exactly one of percent_off or amount_off.', 'percent_off');
    if (p.percent_off !== undefined && !(/^\d{1,3}(\.\d{1,2})?$/.test(p.percent_off) && Number(p.percent_off) > 0 && Number(p.percent_off) <= 100)) return invalid('Invalid percent_off: must be greater than 0 and at most 100, with at most 2 decimal places', 'percent_off');
    if (p.amount_off !== undefined && !(Number.isSafeInteger(Number(p.amount_off)) && Number(p.amount_off) > 0)) return invalid('Invalid amount_off: must be a positive integer', 'amount_off');
    if (p.amount_off !== undefined && !p.currency) return invalid('You must pass currency when passing amount_off', 'currency');
    const duration = p.duration ?? 'once';
    if (!['once', 'repeating', 'forever'].includes(duration)) return invalid('Invalid duration: must be one of forever, once, or repeating', 'duration');
    const months = p.duration_in_months === undefined ? null : Number(p.duration_in_months);
    if ((duration === 'repeating') !== (months !== null) || (months !== null && !(Number.isInteger(months) && months >= 1))) {
      return invalid('duration_in_months is required with (and only with) duration=repeating, a positive integer', 'duration_in_months');
    }
    if (p.name !== undefined && p.name.length > 40) return invalid('Invalid name: must be at most 40 characters', 'name');
    const coupon: Stripe.Coupon = {
      id: p.id ?? randomBytes(4).toString('hex'),
      object: 'coupon',
      amount_off: p.amount_off === undefined ? null : Number(p.amount_off),
      created: this.seconds(),
      currency: p.currency ?? null,
      duration: duration as Stripe.Coupon.Duration,
      duration_in_months: months,
      livemode: false,
      max_redemptions: null,
      metadata: p.metadata ?? {},
      name: p.name ?? null,
      percent_off: p.percent_off === undefined ? null : Number(p.percent_off),
      redeem_by: null,
      times_redeemed: 0,
      valid: true,
    };
    this.coupons.set(coupon.id, { coupon, percent: p.percent_off ?? null });
    return { status: 200, body: coupon };
  }

  /**
   * Stripe's tax on an amount for tax rates (as Stripe computes for tax_rates on a line): an
   * exclusive rate adds amount × p / 100, an inclusive one is the part amount × p / (100 + Σ
   * inclusive p) of it; each rounded to the minor unit, half up.
   */
  taxFor(amount: number, rateIds: readonly string[]): { added: number; taxes: { rate: Stripe.TaxRate; amount: number; taxable: number }[] } {
    const scaled = (p: string) => {
      const [w, f = ''] = p.split('.');
      return BigInt(w!) * 10000n + BigInt((f + '0000').slice(0, 4));
    };
    const halfUp = (n: bigint, d: bigint) => Number((2n * n + d) / (2n * d));
    const rates = rateIds.map((r) => this.taxRates.get(r)!);
    const inclusiveSum = rates.filter((r) => r.rate.inclusive).reduce((sum, r) => sum + scaled(r.percentage), 0n);
    let added = 0;
    const taxes = rates.map((r) => {
      const p = scaled(r.percentage);
      const t = r.rate.inclusive ? halfUp(BigInt(amount) * p, 1000000n + inclusiveSum) : halfUp(BigInt(amount) * p, 1000000n);
      if (!r.rate.inclusive) added += t;
      return { rate: r.rate, amount: t, taxable: amount };
    });
    return { added, taxes };
  }

  private createTaxRate(params: Record<string, unknown>): { status: number; body: unknown } {
    const p = params as { display_name?: string; percentage?: string; inclusive?: string; country?: string; state?: string; description?: string; metadata?: Record<string, string> };
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    if (!p.display_name) return invalid('Missing required param: display_name.', 'display_name');
    if (p.inclusive !== 'true' && p.inclusive !== 'false') return invalid('Missing required param: inclusive.', 'inclusive');
    const percentage = Number(p.percentage);
    if (!p.percentage || !/^\d{1,3}(\.\d{1,4})?$/.test(p.percentage) || !(percentage >= 0 && percentage <= 100)) return invalid('Invalid percentage: must be between 0 and 100 with at most 4 decimal places', 'percentage');
    const rate: Stripe.TaxRate = {
      id: id('txr'),
      object: 'tax_rate',
      active: true,
      country: p.country ?? null,
      created: this.seconds(),
      description: p.description ?? null,
      display_name: p.display_name,
      effective_percentage: percentage,
      flat_amount: null,
      inclusive: p.inclusive === 'true',
      jurisdiction: null,
      jurisdiction_level: null,
      livemode: false,
      metadata: p.metadata ?? {},
      percentage,
      rate_type: 'percentage',
      state: p.state ?? null,
      tax_type: null,
    };
    this.taxRates.set(rate.id, { rate, percentage: p.percentage });
    return { status: 200, body: rate };
  }

  // ---- the API ----

  private createSession(params: Record<string, unknown>): { status: number; body: unknown } {
    const p = params as {
      mode?: string;
      line_items?: Array<{
        quantity?: string;
        price_data?: { currency?: string; unit_amount?: string; product_data?: { name?: string }; recurring?: { interval?: string; interval_count?: string } };
        tax_rates?: string[];
        dynamic_tax_rates?: string[];
      }>;
      billing_address_collection?: string;
      subscription_data?: {
        default_tax_rates?: string[];
        metadata?: Record<string, string>;
        transfer_data?: { destination?: string };
        trial_period_days?: string;
        trial_settings?: { end_behavior?: { missing_payment_method?: string } };
      };
      payment_method_collection?: string;
      customer_email?: string;
      client_reference_id?: string;
      metadata?: Record<string, string>;
      expires_at?: string;
      success_url?: string;
      cancel_url?: string;
      payment_intent_data?: { transfer_data?: { destination?: string } };
      discounts?: Array<{ coupon?: string; promotion_code?: string }>;
      allow_promotion_codes?: string;
    };
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    if (p.mode !== 'payment' && p.mode !== 'subscription') return invalid('This fake takes mode=payment or mode=subscription', 'mode');
    const item = p.line_items?.[0];
    const recurring = item?.price_data?.recurring;
    if (p.mode === 'subscription') {
      if (!recurring?.interval || !['day', 'week', 'month', 'year'].includes(recurring.interval)) return invalid('mode=subscription needs line_items[0].price_data.recurring.interval', 'line_items');
      if (p.payment_intent_data) return invalid('You can not pass `payment_intent_data` in `subscription` mode.', 'payment_intent_data');
    } else if (recurring || p.subscription_data) {
      return invalid('You must be in `subscription` mode to pass recurring prices or `subscription_data`.', 'mode');
    }
    // Stripe's trial parameters (subscription mode only, as subscription_data is): 1-730 days.
    const trialDays = p.subscription_data?.trial_period_days === undefined ? undefined : Number(p.subscription_data.trial_period_days);
    if (trialDays !== undefined && !(Number.isInteger(trialDays) && trialDays >= 1 && trialDays <= 730)) {
      return invalid('subscription_data[trial_period_days] must be an integer between 1 and 730', 'subscription_data[trial_period_days]');
    }
    const missing = p.subscription_data?.trial_settings?.end_behavior?.missing_payment_method;
    if (missing !== undefined && !['cancel', 'create_invoice', 'pause'].includes(missing)) {
      return invalid(`Invalid subscription_data[trial_settings][end_behavior][missing_payment_method]: must be one of cancel, create_invoice, or pause`, 'subscription_data[trial_settings][end_behavior][missing_payment_method]');
    }
    if (p.payment_method_collection !== undefined && !['always', 'if_required'].includes(p.payment_method_collection)) {
      return invalid('Invalid payment_method_collection: must be one of always or if_required', 'payment_method_collection');
    }
    if (p.payment_method_collection === 'if_required' && p.mode === 'subscription' && trialDays === undefined) {
      // What this fake models: a subscription without a trial always needs a payment method.
      return invalid('payment_method_collection=if_required needs a free trial in subscription mode (this fake)', 'payment_method_collection');
    }
    const quantity = Number(item?.quantity ?? 1);
    const unitAmount = Number(item?.price_data?.unit_amount);
    const currency = item?.price_data?.currency;
    if (!item || p.line_items!.length !== 1 || !currency || !Number.isSafeInteger(unitAmount) || !item.price_data?.product_data?.name) {
      return invalid('line_items[0] needs price_data with currency, unit_amount and product_data.name', 'line_items');
    }
    // Stripe's minimum charge (50 cents in USD and EUR): a permanent refusal, however often retried.
    if (['usd', 'eur'].includes(currency) && unitAmount * quantity < 50) {
      return { status: 400, body: { error: { type: 'invalid_request_error', code: 'amount_too_small', message: 'The Checkout Session\'s total amount due must add up to at least €0.50 eur', param: 'line_items[0][price_data][unit_amount]' } } };
    }
    // Tax rates: the line item's, else (subscription mode) the subscription's defaults, as Stripe applies them.
    const taxRateIds = item.tax_rates ?? p.subscription_data?.default_tax_rates ?? [];
    for (const [i, r] of taxRateIds.entries()) {
      if (!this.taxRates.has(r)) return invalid(`No such tax rate: '${r}'`, item.tax_rates ? `line_items[0][tax_rates][${i}]` : `subscription_data[default_tax_rates][${i}]`);
    }
    // Dynamic tax rates: chosen by the buyer's address when the session completes (applyDynamicTax).
    const dynamicIds = item.dynamic_tax_rates;
    if (dynamicIds !== undefined) {
      if (!this.dynamicTaxRatesAvailable) return invalid('Received unknown parameter: line_items[0][dynamic_tax_rates]', 'line_items[0][dynamic_tax_rates]');
      if (item.tax_rates) return invalid('You may only specify one of these parameters: dynamic_tax_rates, tax_rates.', 'line_items[0][dynamic_tax_rates]');
      for (const [i, r] of dynamicIds.entries()) {
        const found = this.taxRates.get(r);
        const param = `line_items[0][dynamic_tax_rates][${i}]`;
        if (!found) return invalid(`No such tax rate: '${r}'`, param);
        if (!found.rate.country || !DYNAMIC_TAX_COUNTRIES.has(found.rate.country)) return invalid(`Tax rate ${r} must have a country supported for dynamic tax rates (US, GB, AU or an EU member state).`, param);
        if (found.rate.country === 'US' && !found.rate.state) return invalid(`Tax rate ${r} must have a state to be used as a dynamic tax rate in the US.`, param);
      }
    }
    if (p.billing_address_collection !== undefined && !['auto', 'required'].includes(p.billing_address_collection)) {
      return invalid('Invalid billing_address_collection: must be one of auto or required', 'billing_address_collection');
    }
    const subtotal = unitAmount * quantity;
    // A discount (one coupon, as Stripe takes on a session) off the line, before its tax.
    if (p.discounts && p.allow_promotion_codes === 'true') return invalid('You may only specify one of these parameters: allow_promotion_codes, discounts.', 'discounts');
    if (p.discounts && p.discounts.length > 1) return invalid('You may only specify one discount on a Checkout Session.', 'discounts');
    const couponId = p.discounts?.[0]?.coupon;
    const found = couponId ? this.coupons.get(couponId) : undefined;
    if (couponId && !found) return invalid(`No such coupon: '${couponId}'`, 'discounts[0][coupon]');
    if (found?.coupon.currency && found.coupon.currency !== currency) return invalid(`The coupon's currency (${found.coupon.currency}) does not match the session's (${currency}).`, 'discounts[0][coupon]');
    const discount = found ? this.discountOff(found.coupon, subtotal) : 0;
    const tax = this.taxFor(subtotal - discount, taxRateIds);
    const now = this.seconds();
    const expiresAt = p.expires_at ? Number(p.expires_at) : now + 24 * 3600;
    if (!(expiresAt >= now + 1800 && expiresAt <= now + 24 * 3600)) return invalid('expires_at must be 30 minutes to 24 hours from now', 'expires_at');
    if (!p.success_url) return invalid('success_url is required', 'success_url');
    const destination = p.payment_intent_data?.transfer_data?.destination ?? p.subscription_data?.transfer_data?.destination;
    if (destination !== undefined) {
      const account = this.accounts.get(destination);
      const param = `${p.mode === 'subscription' ? 'subscription_data' : 'payment_intent_data'}[transfer_data][destination]`;
      if (!account) return invalid(`No such destination: '${destination}'`, param);
      if (account.capabilities?.transfers !== 'active') {
        return invalid('Your destination account needs to have at least one of the following capabilities enabled: transfers, crypto_transfers, legacy_payments', param);
      }
    }
    const sessionId = id('cs_test');
    const session: Stripe.Checkout.Session = {
      id: sessionId,
      object: 'checkout.session',
      adaptive_pricing: null,
      after_expiration: null,
      allow_promotion_codes: null,
      allowed_payment_method_types: null,
      amount_subtotal: subtotal,
      amount_total: subtotal - discount + tax.added,
      automatic_tax: { enabled: false, liability: null, provider: null, status: null },
      billing_address_collection: (p.billing_address_collection as Stripe.Checkout.Session.BillingAddressCollection | undefined) ?? null,
      cancel_url: p.cancel_url ?? null,
      client_reference_id: p.client_reference_id ?? null,
      client_secret: null,
      collected_information: null,
      consent: null,
      consent_collection: null,
      created: now,
      currency,
      currency_conversion: null,
      custom_fields: [],
      custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
      customer: null,
      customer_account: null,
      customer_creation: 'if_required',
      customer_details: null,
      customer_email: p.customer_email ?? null,
      discounts: couponId ? [{ coupon: couponId, promotion_code: null }] : [],
      expires_at: expiresAt,
      integration_identifier: null,
      invoice: null,
      invoice_creation: null,
      livemode: false,
      locale: null,
      managed_payments: null,
      metadata: p.metadata ?? {},
      mode: p.mode,
      origin_context: null,
      payment_intent: null,
      payment_link: null,
      payment_method_collection: (p.payment_method_collection as Stripe.Checkout.Session.PaymentMethodCollection | undefined) ?? 'if_required',
      payment_method_configuration_details: null,
      payment_method_options: null,
      payment_method_types: ['card'],
      payment_status: 'unpaid',
      permissions: null,
      recovered_from: null,
      saved_payment_method_options: null,
      setup_intent: null,
      shipping_address_collection: null,
      shipping_cost: null,
      shipping_options: [],
      status: 'open',
      submit_type: null,
      subscription: null,
      success_url: p.success_url,
      total_details: { amount_discount: discount, amount_shipping: 0, amount_tax: tax.taxes.reduce((sum, t) => sum + t.amount, 0) },
      ui_mode: 'hosted',
      url: `${this.baseUrl}/c/pay/${sessionId}`,
      wallet_options: null,
    };
    this.sessions.set(sessionId, session);
    this.breakdowns.set(sessionId, { discounts: [], taxes: breakdownTaxes(tax.taxes) });
    if (dynamicIds?.length) this.dynamicTaxRates.set(sessionId, { rateIds: dynamicIds, taxable: subtotal - discount });
    if (destination) this.destinations.set(sessionId, destination);
    if (p.mode === 'subscription') {
      this.pendingSubscriptions.set(sessionId, {
        interval: recurring!.interval as Stripe.Price.Recurring.Interval,
        intervalCount: Number(recurring!.interval_count ?? 1),
        unitAmount,
        quantity,
        productName: item.price_data!.product_data!.name!,
        metadata: p.subscription_data?.metadata ?? {},
        taxRates: taxRateIds,
        ...(couponId && { couponId }),
        ...(trialDays !== undefined && {
          trialDays,
          trialSettings: { end_behavior: { billing_cycle_anchor: null, missing_payment_method: (missing ?? 'create_invoice') as Stripe.Subscription.TrialSettings.EndBehavior.MissingPaymentMethod } },
        }),
      });
    }
    return { status: 200, body: session };
  }

  private createRefund(params: Record<string, unknown>): { status: number; body: unknown } {
    const intent = this.intents.get(String(params.payment_intent));
    const alreadyRefunded = intent && this.charges.get(intent.latest_charge as string)?.refunded;
    if (alreadyRefunded) return { status: 400, body: { error: { type: 'invalid_request_error', code: 'charge_already_refunded', message: `Charge ${intent.latest_charge as string} has already been refunded.` } } };
    if (!intent) return { status: 404, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such payment_intent: '${String(params.payment_intent)}'`, param: 'payment_intent' } } };
    const refundedSoFar = [...this.refunds.values()].filter((r) => r.payment_intent === intent.id && r.status !== 'failed' && r.status !== 'canceled').reduce((sum, r) => sum + r.amount, 0);
    const amount = params.amount === undefined ? intent.amount_received - refundedSoFar : Number(params.amount);
    if (intent.status !== 'succeeded' || !Number.isSafeInteger(amount) || amount < 1 || refundedSoFar + amount > intent.amount_received) {
      return { status: 400, body: { error: { type: 'invalid_request_error', code: 'amount_too_large', message: `Refund amount (${amount}) is greater than unrefunded amount on charge (${intent.amount_received - refundedSoFar})`, param: 'amount' } } };
    }
    const transfer = this.transfers.get(intent.id);
    const reverse = params.reverse_transfer === 'true' && transfer !== undefined;
    if (reverse) transfer.reversed += amount;
    const refund: Stripe.Refund = {
      id: id('re'),
      object: 'refund',
      amount,
      balance_transaction: null,
      charge: null,
      created: this.seconds(),
      currency: intent.currency,
      customer: null,
      customer_account: null,
      metadata: {},
      payment_intent: intent.id,
      payment_method: null,
      reason: (params.reason as Stripe.Refund.Reason | undefined) ?? null,
      receipt_number: null,
      source_transfer_reversal: null,
      status: 'succeeded',
      transfer_reversal: reverse ? id('trr') : null,
    };
    this.refunds.set(refund.id, refund);
    const charge = this.charges.get(intent.latest_charge as string)!;
    const refunded = { ...charge, amount_refunded: charge.amount_refunded + amount, refunded: charge.amount_refunded + amount === charge.amount };
    this.charges.set(charge.id, refunded);
    this.refunds.set(refund.id, { ...refund, charge: charge.id });
    this.record('charge.refunded', refunded);
    this.record('refund.created', this.refunds.get(refund.id)!);
    return { status: 200, body: this.refunds.get(refund.id) };
  }

  private setIntentStatus(intent: Stripe.PaymentIntent, status: Stripe.PaymentIntent.Status): Stripe.PaymentIntent {
    const next: Stripe.PaymentIntent = { ...intent, status, amount_received: status === 'succeeded' ? intent.amount : 0, ...(status === 'succeeded' && { last_payment_error: null }) };
    this.intents.set(intent.id, next);
    // A destination charge's payment moves to the connected account once it succeeds.
    if (status === 'succeeded' && next.transfer_data && !this.transfers.has(next.id)) {
      const destination = typeof next.transfer_data.destination === 'string' ? next.transfer_data.destination : next.transfer_data.destination.id;
      this.transfers.set(next.id, { destination, amount: next.amount, reversed: 0 });
    }
    return next;
  }

  private createCharge(intent: Stripe.PaymentIntent, email: string, status: Stripe.Charge.Status): Stripe.Charge {
    const succeeded = status === 'succeeded';
    const charge: Stripe.Charge = {
      id: id('ch'),
      object: 'charge',
      amount: intent.amount,
      amount_captured: succeeded ? intent.amount : 0,
      amount_refunded: 0,
      application: null,
      application_fee: null,
      application_fee_amount: null,
      balance_transaction: null,
      billing_details: { address: null, email, name: null, phone: null, tax_id: null },
      calculated_statement_descriptor: null,
      captured: succeeded,
      created: this.seconds(),
      currency: intent.currency,
      customer: null,
      description: null,
      disputed: false,
      failure_balance_transaction: null,
      failure_code: null,
      failure_message: null,
      fraud_details: null,
      livemode: false,
      metadata: intent.metadata,
      on_behalf_of: null,
      outcome: null,
      paid: succeeded,
      payment_intent: intent.id,
      payment_method: intent.payment_method as string,
      payment_method_details: null,
      receipt_email: null,
      receipt_number: null,
      receipt_url: null,
      refunded: false,
      review: null,
      shipping: null,
      source: null,
      source_transfer: null,
      statement_descriptor: null,
      statement_descriptor_suffix: null,
      status,
      transfer_data: null,
      transfer_group: null,
    };
    this.charges.set(charge.id, charge);
    this.intents.set(intent.id, { ...this.intents.get(intent.id)!, latest_charge: charge.id });
    return charge;
  }

  private createIntent(session: Stripe.Checkout.Session, status: Stripe.PaymentIntent.Status): Stripe.PaymentIntent {
    return this.createIntentFor(session.amount_total ?? 0, session.currency ?? 'usd', status, session.metadata ?? {}, this.destinations.get(session.id));
  }

  private createIntentFor(amount: number, currency: string, status: Stripe.PaymentIntent.Status, metadata: Record<string, string> = {}, destination?: string): Stripe.PaymentIntent {
    const intent: Stripe.PaymentIntent = {
      id: id('pi'),
      object: 'payment_intent',
      allowed_payment_method_types: null,
      amount,
      amount_capturable: 0,
      amount_received: status === 'succeeded' ? amount : 0,
      application: null,
      application_fee_amount: null,
      automatic_payment_methods: null,
      canceled_at: null,
      cancellation_reason: null,
      capture_method: 'automatic',
      client_secret: null,
      confirmation_method: 'automatic',
      created: this.seconds(),
      currency,
      customer: null,
      customer_account: null,
      description: null,
      excluded_payment_method_types: null,
      last_payment_error: null,
      latest_charge: null,
      livemode: false,
      managed_payments: null,
      metadata,
      next_action: null,
      on_behalf_of: null,
      payment_method: id('pm'),
      payment_method_configuration_details: null,
      payment_method_options: null,
      payment_method_types: ['card'],
      payment_record: null,
      processing: null,
      receipt_email: null,
      review: null,
      setup_future_usage: null,
      shipping: null,
      source: null,
      statement_descriptor: null,
      statement_descriptor_suffix: null,
      status,
      transfer_data: destination ? { destination } : null,
      transfer_group: null,
    };
    this.intents.set(intent.id, intent);
    if (destination && status === 'succeeded') this.transfers.set(intent.id, { destination, amount: intent.amount_received, reversed: 0 });
    return intent;
  }

  /** Stripe's idempotency: keyed per API key; the parameters must match to replay. */
  private idempotent(req: Request, res: Response, run: () => { status: number; body: unknown }): void {
    const key = req.header('idempotency-key');
    const paramsHash = createHash('sha256').update(`${req.method} ${req.path} ${JSON.stringify(req.body ?? {})}`).digest('hex');
    const stored = key ? this.idempotency.get(key) : undefined;
    if (stored && stored.paramsHash !== paramsHash) {
      return void this.error(res, 400, {
        type: 'idempotency_error',
        message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
      });
    }
    if (stored) return void res.status(stored.status).set('Idempotent-Replayed', 'true').json(stored.body);
    const answer = run();
    if (key) this.idempotency.set(key, { paramsHash, ...answer });
    res.status(answer.status).json(answer.body);
  }

  private update(sessionId: string, changes: Partial<Stripe.Checkout.Session>): Stripe.Checkout.Session {
    const next = { ...this.mustGet(sessionId), ...changes };
    this.sessions.set(sessionId, next);
    return next;
  }

  private mustGet(sessionId: string): Stripe.Checkout.Session {
    const session = this.sessions.get(sessionId);
    if (!session) throw new Error(`no Checkout Session ${sessionId}`);
    return session;
  }

  private seconds(): number {
    return Math.floor(this.options.now().getTime() / 1000) + this.clockAheadSeconds;
  }

  private missing(res: Response, sessionId: string): void {
    res.status(404).json(missingBody(sessionId));
  }

  private error(res: Response, status: number, error: { type: string; message: string; code?: string }): void {
    res.status(status).set('Request-Id', id('req')).json({ error });
  }
}

function missingObject(kind: string, objectId: string) {
  return { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${kind}: '${objectId}'`, param: 'id' } };
}

/** Stripe's calendar: `from` + n intervals; months clamp to the anchor day (Jan 31 → Feb 28 → Mar 31). */
export function stripePeriodEnd(anchor: number, interval: Stripe.Price.Recurring.Interval, count: number, n: number): number {
  const a = new Date(anchor * 1000);
  if (interval === 'day' || interval === 'week') return anchor + n * count * (interval === 'week' ? 7 : 1) * 86400;
  const months = (interval === 'year' ? 12 : 1) * count * n;
  const total = a.getUTCMonth() + months;
  const year = a.getUTCFullYear() + Math.floor(total / 12);
  const month = total % 12;
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate();
  return Date.UTC(year, month, Math.min(a.getUTCDate(), lastDay), a.getUTCHours(), a.getUTCMinutes(), a.getUTCSeconds()) / 1000;
}

/** The query of `GET /v1/events` as the SDK sends it (`types[0]=…`, `created[gte]=…`). */
interface EventListQuery {
  type?: string;
  types?: string | string[];
  created?: { gt?: string; gte?: string; lt?: string; lte?: string };
  limit?: string;
  starting_after?: string;
  ending_before?: string;
}

function missingBody(sessionId: string) {
  return { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such checkout.session: '${sessionId}'`, param: 'id' } };
}

/** The countries Stripe documents for `dynamic_tax_rates`: "US, GB, AU, and all countries in the EU". */
const DYNAMIC_TAX_COUNTRIES: ReadonlySet<string> = new Set([
  'US', 'GB', 'AU',
  'AT', 'BE', 'BG', 'HR', 'CY', 'CZ', 'DK', 'EE', 'FI', 'FR', 'DE', 'GR', 'HU', 'IE', 'IT', 'LV', 'LT', 'LU', 'MT', 'NL', 'PL', 'PT', 'RO', 'SK', 'SI', 'ES', 'SE',
]);

/** The tax rates an invoice of the subscription applies: its item's own, else the subscription's defaults (Stripe's precedence). */
function invoiceTaxRates(sub: Stripe.Subscription): string[] {
  const item = sub.items.data[0];
  const own = (item?.tax_rates ?? []).map((r) => r.id);
  return own.length > 0 ? own : (sub.default_tax_rates ?? []).map((r) => r.id);
}

/** A session's taxes by rate, as `total_details.breakdown.taxes` lists them. */
function breakdownTaxes(taxes: { rate: Stripe.TaxRate; amount: number; taxable: number }[]): Stripe.Checkout.Session.TotalDetails.Breakdown.Tax[] {
  return taxes.map((t) => ({
    amount: t.amount,
    rate: t.rate,
    taxability_reason: 'standard_rated' as const,
    taxable_amount: t.rate.inclusive ? t.taxable - t.amount : t.taxable,
  }));
}
