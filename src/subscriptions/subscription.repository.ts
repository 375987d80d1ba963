import type { Knex } from 'knex';
import type { ProcessorMismatch, ProcessorPlanRef, ScheduledPlanChange, Subscription, SubscriptionStatus } from '../commerce/model.js';
import type { SubscriptionRepository } from '../commerce/stores.js';
import { readListPage } from '../db/list-page.js';
import type { Keyset, ListPage, ListWindow } from '../kernel/list.js';
import type { BillingInterval } from '../commerce/billing-period.js';



interface SubscriptionRow {
  id: string;
  org_id: string;
  status: SubscriptionStatus;
  provider: 'STRIPE';
  customer_id: string;
  customer_email: string;
  product_id: string | null;
  product_name: string;
  price_id: string | null;
  amount_cents: number | string;
  quantity: number;
  scheduled_change: { priceId: string | null; productId: string | null; productName: string; amountCents: number; quantity: number; requestedAt: string } | string | null;
  currency: string;
  billing_interval: BillingInterval;
  billing_interval_count: number;
  current_period_start: Date;
  current_period_end: Date;
  trial_end: Date | null;
  period_number: number;
  billing_anchor: Date;
  anchor_period: number;
  cancel_at_period_end: boolean;
  canceled_at: Date | null;
  ended_at: Date | null;
  paused_at: Date | null;
  next_action_at: Date;
  failed_attempts: number;
  initial_order_id: string;
  latest_order_id: string;
  checkout_session_id: string;
  payment_method: string;
  manage_token: string;
  processor_subscription_id: string | null;
  action_invoice_id: string | null;
  action_url: string | null;
  action_required_at: Date | null;
  processor_prices?: Record<string, ProcessorPlanRef> | string | null;
  processor_mismatch?: { reason: ProcessorMismatch['reason']; processorPriceId: string; quantity: number; detectedAt: string } | string | null;
  created_at: Date;
  updated_at: Date;
}

const date = (d: Date | null) => (d ? new Date(d) : null);

function scheduled(v: SubscriptionRow['scheduled_change']): ScheduledPlanChange | null {
  if (v === null) return null;
  const o = typeof v === 'string' ? (JSON.parse(v) as Exclude<SubscriptionRow['scheduled_change'], string | null>) : v;
  return { ...o, amountCents: Number(o.amountCents), requestedAt: new Date(o.requestedAt) };
}

const json = <T>(v: T | string | null | undefined): T | null => (v == null ? null : typeof v === 'string' ? (JSON.parse(v) as T) : v);

function mismatch(v: SubscriptionRow['processor_mismatch']): ProcessorMismatch | null {
  const o = json(v);
  return o && { ...o, detectedAt: new Date(o.detectedAt) };
}

const toSubscription = (r: SubscriptionRow): Subscription => ({
  id: r.id,
  orgId: r.org_id,
  status: r.status,
  provider: r.provider,
  customerId: r.customer_id,
  customerEmail: r.customer_email,
  productId: r.product_id,
  productName: r.product_name,
  priceId: r.price_id,
  amountCents: Number(r.amount_cents),
  quantity: r.quantity ?? 1,
  scheduledChange: scheduled(r.scheduled_change ?? null),
  currency: r.currency,
  billingInterval: r.billing_interval,
  billingIntervalCount: r.billing_interval_count,
  currentPeriodStart: new Date(r.current_period_start),
  currentPeriodEnd: new Date(r.current_period_end),
  trialEnd: date(r.trial_end ?? null),
  periodNumber: r.period_number,
  billingAnchor: new Date(r.billing_anchor),
  anchorPeriod: r.anchor_period,
  cancelAtPeriodEnd: r.cancel_at_period_end,
  canceledAt: date(r.canceled_at),
  endedAt: date(r.ended_at),
  pausedAt: date(r.paused_at),
  nextActionAt: new Date(r.next_action_at),
  failedAttempts: r.failed_attempts,
  initialOrderId: r.initial_order_id,
  latestOrderId: r.latest_order_id,
  checkoutSessionId: r.checkout_session_id,
  paymentMethod: r.payment_method,
  manageToken: r.manage_token,
  processorSubscriptionId: r.processor_subscription_id,
  paymentAction:
    r.action_invoice_id && r.action_url && r.action_required_at
      ? { invoiceId: r.action_invoice_id, url: r.action_url, requiredAt: new Date(r.action_required_at) }
      : null,
  processorPrices: json(r.processor_prices),
  processorMismatch: mismatch(r.processor_mismatch),
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

const toRow = (s: Subscription): SubscriptionRow => ({
  id: s.id,
  org_id: s.orgId,
  status: s.status,
  provider: s.provider,
  customer_id: s.customerId,
  customer_email: s.customerEmail,
  product_id: s.productId,
  product_name: s.productName,
  price_id: s.priceId,
  amount_cents: s.amountCents,
  quantity: s.quantity,
  scheduled_change: s.scheduledChange ? JSON.stringify({ ...s.scheduledChange, requestedAt: s.scheduledChange.requestedAt.toISOString() }) : null,
  currency: s.currency,
  billing_interval: s.billingInterval,
  billing_interval_count: s.billingIntervalCount,
  current_period_start: s.currentPeriodStart,
  current_period_end: s.currentPeriodEnd,
  trial_end: s.trialEnd ?? null,
  period_number: s.periodNumber,
  billing_anchor: s.billingAnchor,
  anchor_period: s.anchorPeriod,
  cancel_at_period_end: s.cancelAtPeriodEnd,
  canceled_at: s.canceledAt,
  ended_at: s.endedAt,
  paused_at: s.pausedAt,
  next_action_at: s.nextActionAt,
  failed_attempts: s.failedAttempts,
  initial_order_id: s.initialOrderId,
  latest_order_id: s.latestOrderId,
  checkout_session_id: s.checkoutSessionId,
  payment_method: s.paymentMethod,
  manage_token: s.manageToken,
  processor_subscription_id: s.processorSubscriptionId,
  action_invoice_id: s.paymentAction?.invoiceId ?? null,
  action_url: s.paymentAction?.url ?? null,
  action_required_at: s.paymentAction?.requiredAt ?? null,
  processor_prices: s.processorPrices ? JSON.stringify(s.processorPrices) : null,
  processor_mismatch: s.processorMismatch ? JSON.stringify({ ...s.processorMismatch, detectedAt: s.processorMismatch.detectedAt.toISOString() }) : null,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
});


export class KnexSubscriptionRepository implements SubscriptionRepository {
  constructor(private readonly db: Knex) {}

  async insert(s: Subscription): Promise<void> {
    await this.db('subscriptions').insert(toRow(s));
  }

  async update(s: Subscription, expected: SubscriptionStatus): Promise<boolean> {
    const { id, org_id, created_at, ...changes } = toRow(s);
    return (await this.db('subscriptions').where({ id, org_id, status: expected }).update(changes)) === 1;
  }

  async find(orgId: string, id: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ org_id: orgId, id }).first();
    return row ? toSubscription(row) : undefined;
  }

  async findBySession(checkoutSessionId: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ checkout_session_id: checkoutSessionId }).first();
    return row ? toSubscription(row) : undefined;
  }

  async findByManageToken(token: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ manage_token: token }).first();
    return row ? toSubscription(row) : undefined;
  }

  async findByProcessorSubscription(processorSubscriptionId: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ processor_subscription_id: processorSubscriptionId }).first();
    return row ? toSubscription(row) : undefined;
  }

  async lock(id: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ id }).forUpdate().first();
    return row ? toSubscription(row) : undefined;
  }

  async lockForClose(id: string): Promise<Subscription | undefined> {
    const claimed = await this.db<SubscriptionRow>('subscriptions').where({ id }).forNoKeyUpdate().skipLocked().first('id');
    return claimed ? this.lock(id) : undefined;
  }

  async listDue(now: Date, limit: number): Promise<string[]> {
    // Subscriptions a processor's billing renews (Stripe) are never due here.
    const rows = await this.db('subscriptions')
      .where({ status: 'ACTIVE' })
      .whereNull('processor_subscription_id')
      .andWhere('next_action_at', '<=', now)
      .orderBy('next_action_at')
      .limit(limit)
      .select('id');
    return rows.map((r: { id: string }) => r.id);
  }

  async findById(id: string): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ id }).first();
    return row ? toSubscription(row) : undefined;
  }

  async listTrialsEnding(now: Date, until: Date, limit: number): Promise<string[]> {
    const rows = await this.trialsEnding(this.db<SubscriptionRow>('subscriptions'), now, until).orderBy('trial_end').limit(limit).select('id');
    return rows.map((r: { id: string }) => r.id);
  }

  async claimTrialWillEnd(id: string, now: Date, until: Date): Promise<Subscription | undefined> {
    const rows = await this.trialsEnding(this.db('subscriptions').where({ id }), now, until).update({ trial_will_end_sent_at: now }).returning('*');
    const row = (rows as SubscriptionRow[])[0];
    return row ? toSubscription(row) : undefined;
  }

  /** The trials owed their reminder (the partial index subscriptions_trial_reminders). */
  private trialsEnding<Q extends Knex.QueryBuilder>(q: Q, now: Date, until: Date): Q {
    return q
      .where({ status: 'ACTIVE', cancel_at_period_end: false })
      .whereNotNull('trial_end')
      .whereNull('trial_will_end_sent_at')
      .andWhere('trial_end', '>', now)
      .andWhere('trial_end', '<=', until) as Q;
  }

  async lockIfDue(id: string, now: Date): Promise<Subscription | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions')
      .where({ id, status: 'ACTIVE' })
      .whereNull('processor_subscription_id')
      .andWhere('next_action_at', '<=', now)
      // NO KEY UPDATE: schedulers and changes (FOR UPDATE) exclude each other, while usage ingest's
      // FOR KEY SHARE (usage.repository.ts insertNew) neither blocks nor is blocked by a renewal;
      // only the close of a metered period (lock(), FOR UPDATE) orders itself with ingest.
      .forNoKeyUpdate()
      .skipLocked()
      .first();
    return row ? toSubscription(row) : undefined;
  }

  async closeUsagePeriod(id: string, period: number): Promise<void> {
    await this.db('subscriptions').where({ id }).andWhere((q) => q.whereNull('usage_closed_period').orWhere('usage_closed_period', '<', period)).update({ usage_closed_period: period });
  }

  async usageClosedPeriod(id: string): Promise<number | null> {
    const row = (await this.db('subscriptions').where({ id }).first('usage_closed_period')) as { usage_closed_period: number | string | null } | undefined;
    return row?.usage_closed_period == null ? null : Number(row.usage_closed_period);
  }

  private filtered(orgId: string, filter: { status?: SubscriptionStatus; customerId?: string }) {
    const q = this.db<SubscriptionRow>('subscriptions').where({ org_id: orgId });
    if (filter.status) q.andWhere('status', filter.status);
    if (filter.customerId) q.andWhere('customer_id', filter.customerId);
    return q;
  }

  async keyset(orgId: string, id: string): Promise<Keyset | undefined> {
    const row = await this.db<SubscriptionRow>('subscriptions').where({ org_id: orgId, id }).first('created_at', 'id');
    return row ? { createdAt: new Date(row.created_at), id: row.id } : undefined;
  }

  async list(orgId: string, filter: { status?: SubscriptionStatus; customerId?: string }, window: ListWindow): Promise<ListPage<Subscription>> {
    const page = await readListPage<SubscriptionRow & Record<string, unknown>>(this.db, { filtered: () => this.filtered(orgId, filter), createdAt: 'created_at', id: 'id', select: '*' }, window);
    return { ...page, records: page.records.map(toSubscription) };
  }


  async listActiveForCustomers(orgId: string, customerIds: string[]): Promise<Subscription[]> {
    if (customerIds.length === 0) return [];
    const rows = await this.db<SubscriptionRow>('subscriptions')
      .where({ org_id: orgId, status: 'ACTIVE' })
      // One array parameter (not one per customer): an ingest batch names up to 1,000 customers.
      .whereRaw('customer_id = ANY(?::text[])', [customerIds])
      .whereNotNull('product_id');
    return rows.map(toSubscription);
  }
}
