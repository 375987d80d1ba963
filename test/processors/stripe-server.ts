/**
 * A local Stripe-shaped HTTP server for tests: Kassa's Stripe SDK client is pointed at it
 * (STRIPE_API_BASE_URL). Every object it answers with is typed with the SDK's own types, so a
 * shape that drifts from Stripe's fails to compile. It keeps Checkout Sessions and PaymentIntents,
 * honours Idempotency-Key like Stripe (same key and parameters: the same answer replayed;
 * different parameters: a 400 idempotency_error), and has test hooks for what a buyer or Stripe
 * does on its side: pay, pay asynchronously, let a session expire, fail or hang. For Stripe
 * Connect it keeps connected accounts, checks a Checkout Session's transfer destination against
 * them, moves each paid destination charge to its account as a transfer, and records the transfer
 * reversals of refunds made with `reverse_transfer`.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express, { type Request, type Response } from 'express';
import Stripe from 'stripe';

type CheckoutEventType = Extract<Stripe.Event, { data: { object: Stripe.Checkout.Session } }>['type'];

export interface StripeRequest {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  body: Record<string, unknown>;
}

/** What the next calls to an endpoint do instead of answering (`error500`: Stripe's api_error). */
export type Failure = 'error500' | 'hang';

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
  /** Every request received, in order (retries included). */
  readonly requests: StripeRequest[] = [];
  private readonly idempotency = new Map<string, { paramsHash: string; status: number; body: unknown }>();
  private readonly failures: Failure[] = [];
  private readonly hanging = new Set<Response>();
  private readonly sdk = new Stripe('sk_test_signing_only');
  private server: Server | undefined;
  private baseUrl = 'http://stripe.invalid';

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
      const email = session.customer_email ? `<p>Paying as ${session.customer_email}</p>` : '<input id="email" name="email" type="email" required>';
      res.type('html').send(
        `<!doctype html><title>Stripe Checkout (test)</title><h1 data-testid="stripe-amount">${session.currency?.toUpperCase()} ${((session.amount_total ?? 0) / 100).toFixed(2)}</h1>` +
          `<form method="post">${email}<button type="submit">Pay</button></form><a href="${session.cancel_url}">Back</a>`,
      );
    });
    app.post('/c/pay/:id', async (req, res) => {
      const session = this.sessions.get(req.params.id);
      if (!session || session.status !== 'open') return void res.status(404).send('gone');
      const paid = this.complete(session.id, { email: session.customer_email ?? String(req.body.email) });
      res.redirect(303, paid.success_url!);
      // Like Stripe, the event is sent on its own, after the buyer was sent back.
      void this.send(this.event('checkout.session.completed', paid)).catch(() => undefined);
    });
    app.use((req, res, next) => {
      if (req.header('authorization') !== `Bearer ${this.options.secretKey}`) {
        // Echoes the key it was sent, as a careless upstream might: logs must blank it by value.
        return void this.error(res, 401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${req.header('authorization')?.slice(7)}` });
      }
      this.requests.push({ method: req.method, path: req.path, idempotencyKey: req.header('idempotency-key'), body: req.body ?? {} });
      const failure = req.method === 'POST' || req.method === 'GET' ? this.failures.shift() : undefined;
      if (failure === 'hang') return void this.hanging.add(res);
      if (failure === 'error500') return void this.error(res, 500, { type: 'api_error', message: 'An unknown error occurred' });
      next();
    });
    app.post('/v1/checkout/sessions', (req, res) => this.idempotent(req, res, () => this.createSession(req.body)));
    app.get('/v1/checkout/sessions/:id', (req, res) => {
      const session = this.sessions.get(req.params.id);
      if (!session) return void this.missing(res, req.params.id);
      const expand = ([] as unknown[]).concat((req.query.expand as unknown) ?? []);
      const intent = typeof session.payment_intent === 'string' ? this.intents.get(session.payment_intent) : undefined;
      const body: Stripe.Checkout.Session = expand.includes('payment_intent') && intent ? { ...session, payment_intent: intent } : session;
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
    app.get('/v1/accounts/:id', (req, res) => {
      const account = this.accounts.get(req.params.id);
      if (!account) return void this.error(res, 404, { type: 'invalid_request_error', message: `No such account: '${req.params.id}'` });
      res.json(account);
    });
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

  /** The next `count` requests fail this way (then answers resume). */
  failNext(failure: Failure, count = 1): void {
    for (let i = 0; i < count; i++) this.failures.push(failure);
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

  /** The account is restricted in Stripe (its transfers capability lapses). */
  restrictAccount(accountId: string): void {
    const account = this.accounts.get(accountId)!;
    this.accounts.set(accountId, { ...account, capabilities: { ...account.capabilities, transfers: 'inactive' }, charges_enabled: false });
  }

  /**
   * The buyer pays on Stripe's page: `paid` at once (a card), or `processing` (an asynchronous
   * method, settled later by settleAsync). Returns the session as Stripe now has it.
   */
  complete(sessionId: string, buyer: { email: string; outcome?: 'paid' | 'processing' }): Stripe.Checkout.Session {
    const session = this.mustGet(sessionId);
    if (session.status !== 'open') throw new Error(`cannot complete a ${session.status} session`);
    const paid = (buyer.outcome ?? 'paid') === 'paid';
    const intent = this.createIntent(session, paid ? 'succeeded' : 'processing');
    return this.update(sessionId, {
      status: 'complete',
      payment_status: paid ? 'paid' : 'unpaid',
      payment_intent: intent.id,
      customer_details: { address: null, business_name: null, email: buyer.email, individual_name: null, name: null, phone: null, tax_exempt: 'none', tax_ids: [] },
    });
  }

  /** An asynchronous payment settles: its session is paid, or its PaymentIntent asks for another method. */
  settleAsync(sessionId: string, outcome: 'succeeded' | 'failed'): Stripe.Checkout.Session {
    const session = this.mustGet(sessionId);
    const intent = this.intents.get(session.payment_intent as string)!;
    this.intents.set(intent.id, { ...intent, status: outcome === 'succeeded' ? 'succeeded' : 'requires_payment_method', amount_received: outcome === 'succeeded' ? intent.amount : 0 });
    if (outcome === 'succeeded' && intent.transfer_data) {
      const destination = typeof intent.transfer_data.destination === 'string' ? intent.transfer_data.destination : intent.transfer_data.destination.id;
      this.transfers.set(intent.id, { destination, amount: intent.amount, reversed: 0 });
    }
    return outcome === 'succeeded' ? this.update(sessionId, { payment_status: 'paid' }) : session;
  }

  /** Stripe's own expiry of an open session (its expires_at passed, or an API call). */
  expireNow(sessionId: string): Stripe.Checkout.Session {
    return this.update(sessionId, { status: 'expired', url: null });
  }

  /** A refund made outside Kassa (in the Stripe Dashboard). */
  refundInDashboard(paymentIntentId: string, amount: number): Stripe.Refund {
    const answer = this.createRefund({ payment_intent: paymentIntentId, amount: String(amount) });
    if (answer.status !== 200) throw new Error(JSON.stringify(answer.body));
    return answer.body as Stripe.Refund;
  }

  /** A Stripe event about this session as it is now (or as given: a stale copy). */
  event(type: CheckoutEventType, session: Stripe.Checkout.Session = this.latest()): Stripe.Event {
    const base = {
      id: id('evt'),
      object: 'event' as const,
      api_version: null,
      created: this.seconds(),
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
    };
    return { ...base, type, data: { object: session } } as Extract<Stripe.Event, { type: CheckoutEventType }>;
  }

  /** The body and Stripe-Signature header Stripe would send for this event (`secret` to sign it wrongly). */
  signed(event: Stripe.Event, secret = this.options.webhookSecret): { payload: string; signature: string } {
    return this.signPayload(JSON.stringify(event, null, 2), secret);
  }

  /** Any payload signed as Stripe signs events. */
  signPayload(payload: string, secret = this.options.webhookSecret): { payload: string; signature: string } {
    return { payload, signature: this.sdk.webhooks.generateTestHeaderString({ payload, secret, timestamp: this.seconds() }) };
  }

  /** The session created last. */
  latest(): Stripe.Checkout.Session {
    const all = [...this.sessions.values()];
    if (all.length === 0) throw new Error('no Checkout Session was created');
    return all[all.length - 1]!;
  }

  // ---- the API ----

  private createSession(params: Record<string, unknown>): { status: number; body: unknown } {
    const p = params as {
      mode?: string;
      line_items?: Array<{ quantity?: string; price_data?: { currency?: string; unit_amount?: string; product_data?: { name?: string } } }>;
      customer_email?: string;
      client_reference_id?: string;
      metadata?: Record<string, string>;
      expires_at?: string;
      success_url?: string;
      cancel_url?: string;
      payment_intent_data?: { transfer_data?: { destination?: string } };
    };
    const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });
    if (p.mode !== 'payment') return invalid('This fake takes mode=payment only', 'mode');
    const item = p.line_items?.[0];
    const quantity = Number(item?.quantity ?? 1);
    const unitAmount = Number(item?.price_data?.unit_amount);
    const currency = item?.price_data?.currency;
    if (!item || p.line_items!.length !== 1 || !currency || !Number.isSafeInteger(unitAmount) || !item.price_data?.product_data?.name) {
      return invalid('line_items[0] needs price_data with currency, unit_amount and product_data.name', 'line_items');
    }
    const now = this.seconds();
    const expiresAt = p.expires_at ? Number(p.expires_at) : now + 24 * 3600;
    if (!(expiresAt >= now + 1800 && expiresAt <= now + 24 * 3600)) return invalid('expires_at must be 30 minutes to 24 hours from now', 'expires_at');
    if (!p.success_url) return invalid('success_url is required', 'success_url');
    const destination = p.payment_intent_data?.transfer_data?.destination;
    if (destination !== undefined) {
      const account = this.accounts.get(destination);
      const param = 'payment_intent_data[transfer_data][destination]';
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
      amount_subtotal: unitAmount * quantity,
      amount_total: unitAmount * quantity,
      automatic_tax: { enabled: false, liability: null, provider: null, status: null },
      billing_address_collection: null,
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
      discounts: [],
      expires_at: expiresAt,
      integration_identifier: null,
      invoice: null,
      invoice_creation: null,
      livemode: false,
      locale: null,
      managed_payments: null,
      metadata: p.metadata ?? {},
      mode: 'payment',
      origin_context: null,
      payment_intent: null,
      payment_link: null,
      payment_method_collection: 'if_required',
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
      total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
      ui_mode: 'hosted',
      url: `${this.baseUrl}/c/pay/${sessionId}`,
      wallet_options: null,
    };
    this.sessions.set(sessionId, session);
    if (destination) this.destinations.set(sessionId, destination);
    return { status: 200, body: session };
  }

  private createRefund(params: Record<string, unknown>): { status: number; body: unknown } {
    const intent = this.intents.get(String(params.payment_intent));
    if (!intent) return { status: 404, body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such payment_intent: '${String(params.payment_intent)}'`, param: 'payment_intent' } } };
    const refundedSoFar = [...this.refunds.values()].filter((r) => r.payment_intent === intent.id).reduce((sum, r) => sum + r.amount, 0);
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
      reason: null,
      receipt_number: null,
      source_transfer_reversal: null,
      status: 'succeeded',
      transfer_reversal: reverse ? id('trr') : null,
    };
    this.refunds.set(refund.id, refund);
    return { status: 200, body: refund };
  }

  private createIntent(session: Stripe.Checkout.Session, status: Stripe.PaymentIntent.Status): Stripe.PaymentIntent {
    const destination = this.destinations.get(session.id);
    const intent: Stripe.PaymentIntent = {
      id: id('pi'),
      object: 'payment_intent',
      allowed_payment_method_types: null,
      amount: session.amount_total ?? 0,
      amount_capturable: 0,
      amount_received: status === 'succeeded' ? (session.amount_total ?? 0) : 0,
      application: null,
      application_fee_amount: null,
      automatic_payment_methods: null,
      canceled_at: null,
      cancellation_reason: null,
      capture_method: 'automatic',
      client_secret: null,
      confirmation_method: 'automatic',
      created: this.seconds(),
      currency: session.currency ?? 'usd',
      customer: null,
      customer_account: null,
      description: null,
      excluded_payment_method_types: null,
      last_payment_error: null,
      latest_charge: null,
      livemode: false,
      managed_payments: null,
      metadata: session.metadata ?? {},
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
    return Math.floor(this.options.now().getTime() / 1000);
  }

  private missing(res: Response, sessionId: string): void {
    res.status(404).json(missingBody(sessionId));
  }

  private error(res: Response, status: number, error: { type: string; message: string }): void {
    res.status(status).set('Request-Id', id('req')).json({ error });
  }
}

function missingBody(sessionId: string) {
  return { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such checkout.session: '${sessionId}'`, param: 'id' } };
}
