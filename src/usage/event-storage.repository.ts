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
  /**
   * Drops the weekly partitions (and the legacy one) that end at or before `bound`, each after
   * deleting its events' ids from usage_event_ids; returns those dropped.
   */
  dropPartitionsBefore(bound: Date): Promise<string[]>;
  /**
   * Deletes up to `limit` events stamped before `cutoff`, with their ids, from the partitions that
   * are not whole weeks — the legacy partition (until it is dropped whole) and the default one;
   * returns how many.
   */
  deleteExpired(cutoff: Date, limit: number): Promise<number>;
}

const TABLE = 'usage_events';
/** Heap blocks of a partition whose events' ids one statement deletes (~25 events a block: ~10,000 ids). */
const ID_CHUNK_BLOCKS = 400;

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
    const expired = (await listPartitions(this.db, TABLE)).filter((p) => !p.isDefault && p.to !== null && p.to.getTime() <= bound.getTime());
    if (expired.length === 0) return [];
    // The ids first, walking the partition's heap by block ranges (a TID range scan): no index on
    // the ids' ts is needed (a BRIN on it cost ingest a third of its throughput: docs/benchmarks.md),
    // each id is found by the primary key. A pass stopped half way leaves events without ids, which
    // ingest refuses anyway (stamped before the cutoff); the next pass finishes.
    for (const p of expired) {
      const size = (await this.db.raw(`SELECT pg_relation_size(?::regclass) / current_setting('block_size')::int AS blocks`, [p.name])).rows as Array<{ blocks: string | number }>;
      const blocks = Number(size[0]!.blocks);
      for (let b = 0; b < blocks; b += ID_CHUNK_BLOCKS) {
        await this.db.transaction(async (trx) => {
          // One primary-key probe per id: a hash or merge join would read the whole id table per chunk.
          await trx.raw('SET LOCAL enable_hashjoin = off');
          await trx.raw('SET LOCAL enable_mergejoin = off');
          await trx.raw(
            `DELETE FROM usage_event_ids i USING ?? e WHERE e.ctid >= ?::tid AND e.ctid < ?::tid AND i.org_id = e.org_id AND i.id = e.id`,
            [p.name, `(${b},0)`, `(${b + ID_CHUNK_BLOCKS},0)`],
          );
        });
      }
    }
    return dropPartitionsBefore(this.db, TABLE, bound);
  }

  async deleteExpired(cutoff: Date, limit: number): Promise<number> {
    if (!(await isPartitioned(this.db, TABLE))) return 0;
    // By ctid within one partition at a time (a ctid names a row within one table), ids with them.
    const tables = (await listPartitions(this.db, TABLE)).filter((p) => p.isDefault || p.from === null).map((p) => p.name);
    let deleted = 0;
    for (const table of tables) {
      if (deleted >= limit) break;
      const result = await this.db.raw(
        `WITH gone AS (DELETE FROM ?? WHERE ctid = ANY(ARRAY(SELECT ctid FROM ?? WHERE ts < ? LIMIT ?)) RETURNING org_id, id),
              ids AS (DELETE FROM usage_event_ids i USING gone g WHERE i.org_id = g.org_id AND i.id = g.id)
         SELECT count(*) AS n FROM gone`,
        [table, table, cutoff, limit - deleted],
      );
      deleted += Number((result.rows as Array<{ n: string | number }>)[0]!.n);
    }
    return deleted;
  }
}
