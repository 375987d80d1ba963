/**
 * Where usage events are kept (migration 0380): the weekly partitions of `usage_events` and the
 * ids of `usage_event_ids`, for the partition and retention jobs (src/usage/event-storage.job.ts).
 * Ingest itself writes both in src/usage/usage.repository.ts (insertNew).
 */
import type { Knex } from 'knex';
import { createWeekPartitions, dropPartitionsBefore, isPartitioned, listPartitions, WEEK_MS, weekStart } from '../db/partitions.js';

export interface UsageEventStorage {
  /** Creates this week's partition and the next `weeks` ones where missing; returns those created. */
  createPartitionsAhead(now: Date, weeks: number): Promise<string[]>;
  /** Drops the weekly partitions (and the legacy one) that end at or before `bound`; returns those dropped. */
  dropPartitionsBefore(bound: Date): Promise<string[]>;
  /**
   * Deletes up to `limit` events stamped before `cutoff` from the partitions that are not whole
   * weeks — the legacy partition (until it is dropped whole) and the default one; returns how many.
   */
  deleteExpired(cutoff: Date, limit: number): Promise<number>;
  /** Deletes up to `limit` ids of events stamped before `before` from usage_event_ids; returns how many. */
  pruneIds(before: Date, limit: number): Promise<number>;
}

const TABLE = 'usage_events';

export class KnexUsageEventStorage implements UsageEventStorage {
  constructor(private readonly db: Knex) {}

  async createPartitionsAhead(now: Date, weeks: number): Promise<string[]> {
    if (!(await isPartitioned(this.db, TABLE))) return [];
    const first = weekStart(now.getTime());
    const wanted = Array.from({ length: weeks + 1 }, (_, i) => first + i * WEEK_MS);
    return this.db.transaction((trx) => createWeekPartitions(trx, TABLE, wanted, { lockTimeout: true }));
  }

  async dropPartitionsBefore(bound: Date): Promise<string[]> {
    if (!(await isPartitioned(this.db, TABLE))) return [];
    return dropPartitionsBefore(this.db, TABLE, bound);
  }

  async deleteExpired(cutoff: Date, limit: number): Promise<number> {
    if (!(await isPartitioned(this.db, TABLE))) return 0;
    // By ctid within one partition at a time (a ctid names a row within one table).
    const tables = (await listPartitions(this.db, TABLE)).filter((p) => p.isDefault || p.from === null).map((p) => p.name);
    let deleted = 0;
    for (const table of tables) {
      if (deleted >= limit) break;
      const result = await this.db.raw(`DELETE FROM ?? WHERE ctid = ANY(ARRAY(SELECT ctid FROM ?? WHERE ts < ? LIMIT ?)) RETURNING 1`, [table, table, cutoff, limit - deleted]);
      deleted += (result.rows as unknown[]).length;
    }
    return deleted;
  }

  async pruneIds(before: Date, limit: number): Promise<number> {
    const result = await this.db.raw(`DELETE FROM usage_event_ids WHERE ctid = ANY(ARRAY(SELECT ctid FROM usage_event_ids WHERE ts < ? LIMIT ?)) RETURNING 1`, [before, limit]);
    return (result.rows as unknown[]).length;
  }
}
