/**
 * The floor of `npm run bench:checkout`: `POST /__bench/floor` does the least a durable create can
 * do: one single-row INSERT in autocommit, run the way the create route runs its statement
 * (runStatement, prepared), on the same server, pool and middleware as the merchant API, with no
 * authentication, validation or business rule (the README's benchmark section says why).
 * Mounted by the benchmark's own server (scripts/bench/checkout-server.ts), never by the product;
 * the benchmark creates the `bench_floor` table in its throw-away database (no migration knows it).
 *
 * Beside it, a second reference (printed, not a target): `GET /__bench/read/:id`, the least a read
 * by id can do on this stack: one prepared single-row SELECT by primary key from `bench_read`, a
 * copy of checkout_sessions (same columns, same rows), answered as the row's JSON, no
 * authentication. Its ratio to the floor says whether any read by id can cost what a one-row
 * insert costs on node-postgres and node:http.
 */
import type { Router } from 'express';
import { runStatement, type Db } from '../src/db/knex.js';
import type { Clock } from '../src/kernel/clock.js';
import { randomToken } from '../src/kernel/ids.js';
import { writeJson } from '../src/http/openapi-app.js';

export const BENCH_FLOOR_TABLE_SQL = 'CREATE TABLE IF NOT EXISTS bench_floor (id text PRIMARY KEY, payload jsonb NOT NULL, created_at timestamptz(3) NOT NULL)';

/** After the benchmark's seeding (it copies the seeded sessions): checkout_sessions' shape and rows. */
export const BENCH_READ_TABLE_SQL = 'CREATE TABLE bench_read AS TABLE checkout_sessions; ALTER TABLE bench_read ADD PRIMARY KEY (id)';

const INSERT_FLOOR_ROW_SQL = 'INSERT INTO bench_floor (id, payload, created_at) VALUES ($1, $2, $3)';

export class BenchFloorRepository {
  constructor(private readonly db: Db) {}

  async insertOne(id: string, payload: Record<string, unknown>, now: Date): Promise<void> {
    await runStatement(this.db, INSERT_FLOOR_ROW_SQL, [id, JSON.stringify(payload), now.toISOString()]);
  }

  async readOne(id: string): Promise<Record<string, unknown> | undefined> {
    // Every column, listed (a prepared statement's result type must not change under it).
    this.readSql ??= await this.readStatement();
    return (await runStatement<Record<string, unknown>>(this.db, this.readSql, [id]))[0];
  }

  private readSql?: string;

  private async readStatement(): Promise<string> {
    const columns = await runStatement<{ name: string }>(this.db, "SELECT attname AS name FROM pg_attribute WHERE attrelid = 'bench_read'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum", []);
    return `SELECT ${columns.map((c) => c.name).join(', ')} FROM bench_read WHERE id = $1`;
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
  router.get('/__bench/read/:id', async (req, res, next) => {
    try {
      const row = await repo.readOne(req.params.id!);
      if (row) writeJson(res, 200, { success: true, message: 'OK', data: row });
      else writeJson(res, 404, { success: false, message: 'not found' });
    } catch (err) {
      next(err);
    }
  });
}
