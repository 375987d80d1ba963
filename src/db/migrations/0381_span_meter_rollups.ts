/**
 * Span meter rollups (issue 38, performance: "the same for a meter over 10M spans"): a customer's
 * quantity of a span meter read O(hours) rows instead of unpacking every model-call span of the
 * period (2M spans: 13 s wall, 3.7 s of PostgreSQL CPU per read).
 *
 * - span_meter_hours: per (span meter, customer key, UTC hour) the model-call spans the meter's
 *   filter matched: their count, the sum and the maximum of the property's numeric values, and the
 *   latest numeric value with its (start ms, "traceId:spanId") — the same tie-break as the raw read.
 *   The key is the raw value of the meter's customer attribute (on the span, else on its trace's
 *   root span; a number as its float8 text), not a customer id: a read resolves the customer to
 *   its keys (its id and its externalId), so an externalId set after the spans arrived still maps.
 * - span_meter_hour_values: for `unique` meters, the distinct values per (meter, key, hour); a
 *   period's distinct count is count(DISTINCT value) over these rows (hourly counts do not add).
 *
 * Kept by span ingest for the ACTIVE span meters of the project (src/telemetry/span-meters.repository.ts),
 * built in the background (cursor = the next hour to build, epoch ms as text) after a meter is
 * created or its filter changes. The span meters that exist now are set BUILDING here, so the
 * `usage-meter-rollups` job builds their rows (reads go to the raw spans until READY).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE span_meter_hours (
    meter_id text COLLATE "C" NOT NULL REFERENCES meters(id) ON DELETE CASCADE,
    key text COLLATE "C" NOT NULL,
    hour_ms bigint NOT NULL,
    spans bigint NOT NULL,
    total numeric NOT NULL,
    maximum numeric,
    last_at bigint,
    last_id text COLLATE "C",
    last_value numeric,
    PRIMARY KEY (meter_id, key, hour_ms)
  )`);
  await db.raw(`CREATE TABLE span_meter_hour_values (
    meter_id text COLLATE "C" NOT NULL REFERENCES meters(id) ON DELETE CASCADE,
    key text COLLATE "C" NOT NULL,
    hour_ms bigint NOT NULL,
    value jsonb NOT NULL,
    PRIMARY KEY (meter_id, key, hour_ms, value)
  )`);
  // Ingest finds the ACTIVE span meters of its project by this index.
  await db.raw("CREATE INDEX meters_span_project ON meters ((filter ->> 'projectId')) WHERE source = 'SPANS' AND status = 'ACTIVE'");
  await db.raw("UPDATE meters SET rollup_status = 'BUILDING', rollup_cursor = '' WHERE source = 'SPANS' AND status = 'ACTIVE'");
}

export async function down(db: Knex): Promise<void> {
  await db.raw("UPDATE meters SET rollup_status = 'READY', rollup_cursor = NULL WHERE source = 'SPANS'");
  await db.raw('DROP INDEX meters_span_project');
  await db.raw('DROP TABLE span_meter_hour_values');
  await db.raw('DROP TABLE span_meter_hours');
}
