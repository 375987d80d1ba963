/** Usage invoices of processor-billed subscriptions (migration 0320; src/commerce/processor-usage.ts). */
import type { Knex } from 'knex';
import type { UsageInvoice, UsageInvoiceRepository } from '../commerce/processor-usage.js';
import type { LineInput } from '../commerce/pricing.js';
import type { CreditLedger } from '../commerce/stores.js';
import { KnexCreditLedger } from '../usage/credits.repository.js';

interface Row {
  processor_invoice_id: string;
  org_id: string;
  subscription_id: string;
  kind: UsageInvoice['kind'];
  usage_period: number;
  usage_start: Date;
  usage_end: Date;
  due_at: Date;
  state: UsageInvoice['state'];
  lines: LineInput[] | string | null;
  created_at: Date;
  updated_at: Date;
  makeup_attempts?: number;
  plan_recorded?: boolean;
  plan_price_id?: string | null;
  plan_product_name?: string | null;
}

const linesOf = (value: Row['lines']): LineInput[] | null => (typeof value === 'string' ? (JSON.parse(value) as LineInput[]) : value);

const toInvoice = (r: Row): UsageInvoice => ({
  processorInvoiceId: r.processor_invoice_id,
  orgId: r.org_id,
  subscriptionId: r.subscription_id,
  kind: r.kind,
  usagePeriod: r.usage_period,
  usageStart: new Date(r.usage_start),
  usageEnd: new Date(r.usage_end),
  dueAt: new Date(r.due_at),
  state: r.state,
  lines: linesOf(r.lines),
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
  makeupAttempts: r.makeup_attempts ?? 0,
  // Migration 0446: the plan the range was used under, when recorded.
  plan: r.plan_recorded ? { priceId: r.plan_price_id ?? null, productName: r.plan_product_name ?? '' } : null,
});

export class KnexUsageInvoiceRepository implements UsageInvoiceRepository {
  constructor(private readonly db: Knex) {}

  async insert(i: UsageInvoice): Promise<void> {
    // Either unique key (the invoice, or the subscription's period) makes a second insert a no-op.
    await this.db.raw(
      `INSERT INTO processor_usage_invoices (processor_invoice_id, org_id, subscription_id, kind, usage_period, usage_start, usage_end, due_at, state, lines, created_at, updated_at, plan_recorded, plan_price_id, plan_product_name)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [i.processorInvoiceId, i.orgId, i.subscriptionId, i.kind, i.usagePeriod, i.usageStart, i.usageEnd, i.dueAt, i.state, i.lines ? JSON.stringify(i.lines) : null, i.createdAt, i.updatedAt, Boolean(i.plan), i.plan?.priceId ?? null, i.plan?.productName ?? null],
    );
  }

  async insertRenewal(i: UsageInvoice): Promise<void> {
    await this.db.transaction(async (trx) => {
      // NO KEY UPDATE: waits for a cancel's close (FOR UPDATE), not for usage ingest (FOR KEY SHARE).
      const sub = (await trx('subscriptions').where({ id: i.subscriptionId }).forNoKeyUpdate().first('usage_closed_period')) as { usage_closed_period: number | string | null } | undefined;
      const claimed = sub?.usage_closed_period != null && Number(sub.usage_closed_period) > i.usagePeriod;
      await new KnexUsageInvoiceRepository(trx).insert(claimed ? { ...i, usageStart: i.usageEnd } : i);
    });
  }

  async find(processorInvoiceId: string): Promise<UsageInvoice | undefined> {
    const row = (await this.db('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId }).first()) as Row | undefined;
    return row && toInvoice(row);
  }

  async findFor(subscriptionId: string, kind: UsageInvoice['kind'], usagePeriod: number): Promise<UsageInvoice | undefined> {
    const row = (await this.db('processor_usage_invoices').where({ subscription_id: subscriptionId, kind, usage_period: usagePeriod }).first()) as Row | undefined;
    return row && toInvoice(row);
  }

  async listDue(now: Date, limit: number): Promise<string[]> {
    const rows = await this.db('processor_usage_invoices').where({ state: 'HELD' }).andWhere('due_at', '<=', now).orderBy('due_at').limit(limit).select('processor_invoice_id');
    return rows.map((r: { processor_invoice_id: string }) => r.processor_invoice_id);
  }

  async setLines(processorInvoiceId: string, lines: (credits: CreditLedger) => Promise<LineInput[]>, now: Date): Promise<LineInput[]> {
    // Under the row's lock: of two concurrent closes, the first one's lines (and its credit draws) stay, and both bill those.
    return this.db.transaction(async (trx) => {
      const row = (await trx('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId }).forUpdate().first('lines')) as Pick<Row, 'lines'>;
      const stored = linesOf(row.lines);
      if (stored) return stored;
      const written = await lines(new KnexCreditLedger(trx));
      await trx('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId }).whereNull('lines').update({ lines: JSON.stringify(written), updated_at: now });
      return written;
    });
  }

  async settle(processorInvoiceId: string, state: 'FINALIZED' | 'MISSED', now: Date): Promise<void> {
    // A RENEWAL settled MISSED is due for its make-up now, in the same write (no window where it is MISSED and not due).
    await this.db.raw(
      `UPDATE processor_usage_invoices SET state = ?, updated_at = ?,
         makeup_retry_at = CASE WHEN ? = 'MISSED' AND kind = 'RENEWAL' THEN ?::timestamptz ELSE makeup_retry_at END
       WHERE processor_invoice_id = ? AND state = 'HELD'`,
      [state, now, state, now, processorInvoiceId],
    );
  }

  async leaseMakeups(now: Date, leaseUntil: Date, limit: number): Promise<UsageInvoice[]> {
    const result = await this.db.raw(
      `UPDATE processor_usage_invoices SET makeup_retry_at = ?, makeup_attempts = makeup_attempts + 1
       WHERE processor_invoice_id IN (
         SELECT processor_invoice_id FROM processor_usage_invoices
         WHERE makeup_retry_at IS NOT NULL AND makeup_retry_at <= ? AND kind = 'RENEWAL' AND state = 'MISSED'
         ORDER BY makeup_retry_at LIMIT ? FOR UPDATE SKIP LOCKED)
         AND makeup_retry_at <= ?
       RETURNING *`,
      [leaseUntil, now, limit, now],
    );
    return ((result.rows ?? []) as Row[]).map(toInvoice).sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  }

  async makeupDone(processorInvoiceId: string): Promise<void> {
    await this.db('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId }).whereNotNull('makeup_retry_at').update({ makeup_retry_at: null });
  }

  async makeupRetryAt(processorInvoiceId: string, at: Date | null): Promise<void> {
    await this.db('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId }).whereNotNull('makeup_retry_at').update({ makeup_retry_at: at });
  }
}
