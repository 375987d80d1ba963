/** The scrape-time reads of src/observability/metrics.ts. The only module of this domain that speaks knex. */
import type { Db } from '../db/knex.js';

export interface MetricsSnapshot {
  outbox: { pending: number; due: number; leased: number; oldestDueAt: Date | null };
  chainCursors: Array<{ chainId: number; updatedAt: Date }>;
}

export interface MetricsRepository {
  snapshot(now: Date): Promise<MetricsSnapshot>;
}

interface OutboxRow {
  pending: number | string;
  due: number | string;
  leased: number | string;
  oldest_due: Date | string | null;
}

export class KnexMetricsRepository implements MetricsRepository {
  constructor(private readonly db: Db) {}

  async snapshot(now: Date): Promise<MetricsSnapshot> {
    // One round trip; every count runs on the partial index of pending deliveries.
    const result = await this.db.raw(
      `SELECT count(*) AS pending,
              count(*) FILTER (WHERE next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)) AS due,
              count(*) FILTER (WHERE lease_until > ?) AS leased,
              min(next_attempt_at) FILTER (WHERE next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)) AS oldest_due
         FROM webhook_deliveries WHERE status = 'pending'`,
      [now, now, now, now, now],
    );
    const row = (result.rows as OutboxRow[])[0]!;
    const cursors = (await this.db('crypto_chain_cursors').select('chain_id', 'updated_at').orderBy('chain_id')) as Array<{ chain_id: number; updated_at: Date | string }>;
    return {
      outbox: {
        pending: Number(row.pending),
        due: Number(row.due),
        leased: Number(row.leased),
        oldestDueAt: row.oldest_due === null ? null : new Date(row.oldest_due),
      },
      chainCursors: cursors.map((c) => ({ chainId: Number(c.chain_id), updatedAt: new Date(c.updated_at) })),
    };
  }
}
