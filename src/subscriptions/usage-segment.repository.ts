/** Parts of a metered subscription's period billed on a price it left (migration 0450, src/commerce/metered-plan-change.ts). */
import type { Knex } from 'knex';
import type { UsageSegment, UsageSegmentRepository } from '../commerce/stores.js';

interface Row {
  subscription_id: string;
  org_id: string;
  period_number: number;
  seq: number;
  price_id: string | null;
  product_name: string;
  start_at: Date | string;
  end_at: Date | string;
  created_at: Date | string;
}

const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));

export class KnexUsageSegmentRepository implements UsageSegmentRepository {
  constructor(private readonly db: Knex) {}

  async list(subscriptionId: string, periodNumber: number): Promise<UsageSegment[]> {
    const rows = (await this.db('subscription_usage_segments').where({ subscription_id: subscriptionId, period_number: periodNumber }).orderBy('seq')) as Row[];
    return rows.map((r) => ({
      subscriptionId: r.subscription_id,
      orgId: r.org_id,
      periodNumber: Number(r.period_number),
      seq: Number(r.seq),
      priceId: r.price_id,
      productName: r.product_name,
      start: date(r.start_at),
      end: date(r.end_at),
      createdAt: date(r.created_at),
    }));
  }

  async insert(s: UsageSegment): Promise<void> {
    await this.db('subscription_usage_segments').insert({
      subscription_id: s.subscriptionId,
      org_id: s.orgId,
      period_number: s.periodNumber,
      seq: s.seq,
      price_id: s.priceId,
      product_name: s.productName,
      start_at: s.start,
      end_at: s.end,
      created_at: s.createdAt,
    });
  }
}
