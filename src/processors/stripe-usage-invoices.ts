/**
 * Kassa's usage lines on Stripe invoices (src/commerce/processor-usage.ts): a renewal draft held
 * (`auto_advance: false`) until Kassa's grace window has passed, each USAGE line added as one
 * invoice item of its rounded amount (`POST /v1/invoiceitems` with `invoice`), then the draft
 * finalized with `auto_advance: true` (Stripe charges it and sends `invoice.paid`). Every call
 * carries an idempotency key; an item the invoice already carries (its metadata
 * `kassa_usage_item`, e.g. added by a retry after Stripe's 24-hour key window) is not added again.
 */
import Stripe from 'stripe';
import { serviceUnavailable } from '../kernel/errors.js';
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
  ) {}

  async hold(invoiceId: string): Promise<'held' | 'finalized'> {
    const invoice = await this.call(() => this.stripe.invoices.retrieve(invoiceId), 'read an invoice');
    if (invoice.status !== 'draft') return 'finalized';
    if (invoice.auto_advance === false) return 'held';
    const held = await this.call(() => this.stripe.invoices.update(invoiceId, { auto_advance: false }, { idempotencyKey: `kassa_usage_hold_${invoiceId}` }), 'hold a draft invoice');
    return held.status === 'draft' ? 'held' : 'finalized';
  }

  async openFinal(processorSubscriptionId: string, idempotencyKey: string, kind: 'FINAL' | 'MAKEUP'): Promise<string> {
    const sub = await this.call(() => this.stripe.subscriptions.retrieve(processorSubscriptionId), 'read a subscription');
    const customer = typeof sub.customer === 'string' ? sub.customer : sub.customer.id;
    const params: Stripe.InvoiceCreateParams = {
      customer,
      subscription: processorSubscriptionId,
      auto_advance: false,
      pending_invoice_items_behavior: 'exclude',
      metadata: { kassa_usage: kind === 'FINAL' ? 'final' : 'makeup' },
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
        metadata: { [KASSA_USAGE_ITEM_KEY]: item.key, kassa_meter_id: item.meterId },
      };
      await this.call(() => this.stripe.invoiceItems.create(params, { idempotencyKey: item.key }), 'add a usage invoice item');
    }
    await this.call(() => this.stripe.invoices.finalizeInvoice(invoiceId, { auto_advance: true }, { idempotencyKey: `kassa_usage_finalize_${invoiceId}` }), 'finalize a usage invoice');
    return 'finalized';
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
