/**
 * Span meter points (issue 38, performance: a span meter's read ≤ 2 ms of server CPU, flat to 10M
 * spans): one narrow row per span a span meter matched — (meter, customer key, start ms,
 * "traceId:spanId") and the property's value — beside the hourly cells of 0381. A billing range
 * starts and ends at any millisecond (a subscription's period starts when it was bought), so the
 * partial hours at its edges cannot come from any coarser cell and still equal a recomputation
 * from the raw spans; they used to be read from the raw spans (every trace of the project in that
 * hour unpacked, for every customer). Now they are an index range of this table by
 * (meter, key, start): the customer's own spans of at most two partial hours, whatever the
 * project's size. A cell's points are written and rewritten with its hour row (ingest's add and
 * recompute, the background build), so the two always agree.
 *
 * Cost (docs/benchmarks.md): one row (and its index entry) per matched span and meter.
 * The existing span meters are set BUILDING again so the `usage-meter-rollups` job writes their
 * points; until READY their reads go to the raw spans (exact, only slower), as after 0381.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE span_meter_points (
    meter_id text COLLATE "C" NOT NULL REFERENCES meters(id) ON DELETE CASCADE,
    key text COLLATE "C" NOT NULL,
    st bigint NOT NULL,
    id text COLLATE "C" NOT NULL,
    v jsonb,
    PRIMARY KEY (meter_id, key, st, id)
  )`);
  await db.raw("UPDATE meters SET rollup_status = 'BUILDING', rollup_cursor = '' WHERE source = 'SPANS' AND status = 'ACTIVE'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE span_meter_points');
}
