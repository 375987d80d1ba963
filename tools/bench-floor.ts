/**
 * The floor of `npm run bench:checkout`: `POST /__bench/floor` does the least a durable create can
 * do: one single-row INSERT in autocommit, run the way the create route runs its statement
 * (runStatement, prepared), on the same server, pool and middleware as the merchant API, with no
 * authentication, validation or business rule (the README's benchmark section says why).
 * Mounted by the benchmark's own server (scripts/bench/checkout-server.ts), never by the product;
 * the benchmark creates the `bench_floor` table in its throw-away database (no migration knows it).
 */
import type { Router } from 'express';
import { runStatement, type Db } from '../src/db/knex.js';
import type { Clock } from '../src/kernel/clock.js';
import { randomToken } from '../src/kernel/ids.js';
import { writeJson } from '../src/http/openapi-app.js';

export const BENCH_FLOOR_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS bench_floor (id text PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz(3) NOT NULL)';

const INSERT_FLOOR_ROW_SQL = 'INSERT INTO bench_floor (id, payload, created_at) VALUES ($1, $2, $3)';

export class BenchFloorRepository {
  constructor(private readonly db: Db) {}

  async insertOne(id: string, payload: Record<string, unknown>, now: Date): Promise<void> {
    await runStatement(this.db, INSERT_FLOOR_ROW_SQL, [id, JSON.stringify(payload), now.toISOString()]);
  }
}

export function registerBenchFloor(router: Router, repo: BenchFloorRepository, clock: Clock): void {
  router.post('/__bench/floor', async (req, res, next) => {
    try {
      const id = `BF_${randomToken()}`;
      await repo.insertOne(id, { requestId: req.requestId }, clock.now());
      writeJson(res, 201, { success: true, message: 'created', data: { id } });
    } catch (err) {
      next(err);
    }
  });
}
