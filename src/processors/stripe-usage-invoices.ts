/**
 * Kassa's usage lines on Stripe invoices (src/commerce/processor-usage.ts): a renewal draft held
 * (`auto_advance: false`) until Kassa's grace window has passed, each USAGE line added as one
 * invoice item of its rounded amount (`POST /v1/invoiceitems` with `invoice`), then the draft
 * finalized with `auto_advance: true` (Stripe charges it and sends `invoice.paid`). Every call
 * carries an idempotency key; an item the invoice already carries (its metadata
 * `kassa_usage_item`, e.g. added by a retry after Stripe's 24-hour key window) is not added again.
 *
 * Tax and discount as the subscription's own line has them (docs/usage-billing.md, "Tax and
 * discounts on Stripe usage invoices"): each item carries the tax rates of the subscription's item
 * (its `tax_rates`, else the subscription's `default_tax_rates`) explicitly — Stripe would apply the
 * subscription's defaults to a renewal draft's items, but not a rate chosen per item (dynamic tax
 * rates), nor, documented, to an invoice Kassa opens itself. A cancel-now's or make-up's invoice
 * reuses the subscription's discount while it lasts (`discounts[0][discount]`), as the
 * subscription's own invoices take it.
 */
import Stripe from 'stripe';
import { serviceUnavailable } from '../kernel/errors.js';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { ProcessorUsageInvoicing, UsageInvoiceItem } from '../commerce/processor-usage.js';
import { INTERACTIVE, withStripeRetries } from './stripe-retry.js';

/** The metadata key naming the Kassa usage item an invoice item is. */
export const KASSA_USAGE_ITEM_KEY = 'kassa_usage_item';

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

export class StripeUsageInvoicing implements ProcessorUsageInvoicing {
  constructor(
    private readonly stripe: Stripe,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {}

  async hold(invoiceId: string): Promise<'held' | 'finalized'> {
    const invoice = await this.call(() => this.stripe.invoices.retrieve(invoiceId), 'read an invoice');
    if (invoice.status !== 'draft') return 'finalized';
    if (invoice.auto_advance === false) return 'held';
    const held = await this.call(() => this.stripe.invoices.update(invoiceId, { auto_advance: false }, { idempotencyKey: `kassa_usage_hold_${invoiceId}` }), 'hold a draft invoice');
    return held.status === 'draft' ? 'held' : 'finalized';
  }

  async openFinal(processorSubscriptionId: string, idempotencyKey: string, kind: 'FINAL' | 'MAKEUP'): Promise<string> {
    const sub = await this.call(() => this.stripe.subscriptions.retrieve(processorSubscriptionId, { expand: ['discounts'] }), 'read a subscription');
    const customer = typeof sub.customer === 'string' ? sub.customer : sub.customer.id;
    // The subscription's discount while it lasts (Stripe drops an ended one; `end` guards a late read).
    const now = Math.floor(this.clock.now().getTime() / 1000);
    const discount = (sub.discounts ?? []).find((d): d is Stripe.Discount => typeof d !== 'string' && (d.end === null || d.end > now));
    const params: Stripe.InvoiceCreateParams = {
      customer,
      subscription: processorSubscriptionId,
      auto_advance: false,
      pending_invoice_items_behavior: 'exclude',
      metadata: { kassa_usage: kind === 'FINAL' ? 'final' : 'makeup' },
      ...(discount && { discounts: [{ discount: discount.id }] }),
    };
    const invoice = await this.call(() => this.stripe.invoices.create(params, { idempotencyKey }), 'open a usage invoice');
    return invoice.id;
  }

  async bill(invoiceId: string, items: readonly UsageInvoiceItem[]): Promise<'finalized' | 'missed'> {
    const invoice = await this.call(() => this.stripe.invoices.retrieve(invoiceId), 'read an invoice');
    const carried = await this.call(async () => {
      const keys = new Set<string>();
      for await (const line of this.stripe.invoices.listLineItems(invoiceId, { limit: 100 })) {
        const key = line.metadata?.[KASSA_USAGE_ITEM_KEY];
        if (key) keys.add(key);
      }
      return keys;
    }, "list an invoice's lines");
    if (invoice.status !== 'draft') {
      // A retry after the finalization: done. Finalized without the items: too late to add them.
      return items.every((i) => carried.has(i.key)) ? 'finalized' : 'missed';
    }
    const customer = typeof invoice.customer === 'string' ? invoice.customer : invoice.customer!.id;
    const taxRates = await this.subscriptionTaxRates(invoice);
    for (const item of items) {
      if (carried.has(item.key)) continue;
      const params: Stripe.InvoiceItemCreateParams = {
        customer,
        invoice: invoiceId,
        amount: item.amountCents,
        currency: item.currency.toLowerCase(),
        description: item.description.slice(0, 500),
        period: { start: seconds(item.periodStart), end: seconds(item.periodEnd) },
        discountable: item.discountable,
        ...(taxRates.length > 0 && { tax_rates: taxRates }),
        metadata: { [KASSA_USAGE_ITEM_KEY]: item.key, kassa_meter_id: item.meterId },
      };
      await this.call(() => this.stripe.invoiceItems.create(params, { idempotencyKey: item.key }), 'add a usage invoice item');
    }
    await this.call(() => this.stripe.invoices.finalizeInvoice(invoiceId, { auto_advance: true }, { idempotencyKey: `kassa_usage_finalize_${invoiceId}` }), 'finalize a usage invoice');
    return 'finalized';
  }

  /** The tax rates Stripe applies to the invoice's subscription line: its item's, else the subscription's defaults. */
  private async subscriptionTaxRates(invoice: Stripe.Invoice): Promise<string[]> {
    const ref = invoice.parent?.subscription_details?.subscription;
    const subscriptionId = typeof ref === 'string' ? ref : ref?.id;
    if (!subscriptionId) return [];
    const sub = await this.call(() => this.stripe.subscriptions.retrieve(subscriptionId), 'read a subscription');
    const idsOf = (rates: readonly (string | Stripe.TaxRate)[] | null | undefined) => (rates ?? []).map((r) => (typeof r === 'string' ? r : r.id));
    const own = sub.items.data.length === 1 ? idsOf(sub.items.data[0]!.tax_rates) : [];
    return own.length > 0 ? own : idsOf(sub.default_tax_rates);
  }

  private async call<T>(run: () => Promise<T>, what: string): Promise<T> {
    try {
      return await withStripeRetries(run, INTERACTIVE);
    } catch (err) {
      const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, code: err.code, statusCode: err.statusCode, requestId: err.requestId } : undefined;
      this.logger.warn({ err: stripe ? undefined : err, stripe }, `Stripe: could not ${what}`);
      throw serviceUnavailable(`Stripe could not be reached to ${what}; it is retried`);
    }
  }
}
