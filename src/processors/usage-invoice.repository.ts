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
});

export class KnexUsageInvoiceRepository implements UsageInvoiceRepository {
  constructor(private readonly db: Knex) {}

  async insert(i: UsageInvoice): Promise<void> {
    // Either unique key (the invoice, or the subscription's period) makes a second insert a no-op.
    await this.db.raw(
      `INSERT INTO processor_usage_invoices (processor_invoice_id, org_id, subscription_id, kind, usage_period, usage_start, usage_end, due_at, state, lines, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?) ON CONFLICT DO NOTHING`,
      [i.processorInvoiceId, i.orgId, i.subscriptionId, i.kind, i.usagePeriod, i.usageStart, i.usageEnd, i.dueAt, i.state, i.lines ? JSON.stringify(i.lines) : null, i.createdAt, i.updatedAt],
    );
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
    await this.db('processor_usage_invoices').where({ processor_invoice_id: processorInvoiceId, state: 'HELD' }).update({ state, updated_at: now });
  }
}
