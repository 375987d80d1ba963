/**
 * The floor of `npm run bench:checkout`: `POST /__bench/floor` does the least a durable create can
 * do — one single-row INSERT in its own transaction, on the same server, pool and middleware as
 * the merchant API (request id, access log, metrics), with no authentication, validation or
 * business rule. Mounted only when KASSA_BENCH_FLOOR=true (refused in production); the benchmark
 * creates the `bench_floor` table in its own throw-away database, so no migration knows about it.
 */
import type { Router } from 'express';
import { PREPARED, type Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';

export const BENCH_FLOOR_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS bench_floor (id text PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz(3) NOT NULL)';

export class BenchFloorRepository {
  constructor(private readonly db: Db) {}

  async insertOne(id: string, payload: Record<string, unknown>, now: Date): Promise<void> {
    await this.db.transaction(async (trx) => {
      // Prepared like the create route's statements, so the floor stays the least a create can cost.
      await trx('bench_floor').insert({ id, payload: JSON.stringify(payload), created_at: now }).options(PREPARED);
    });
  }
}

export function registerBenchFloor(router: Router, repo: BenchFloorRepository, clock: Clock): void {
  router.post('/__bench/floor', async (req, res, next) => {
    try {
      const id = `BF_${randomToken()}`;
      await repo.insertOne(id, { requestId: req.requestId }, clock.now());
      res.status(201).json({ success: true, message: 'created', data: { id } });
    } catch (err) {
      next(err);
    }
  });
}
