/**
 * Meter rollups (issue 38, performance): a customer's quantity over a period read O(hours) rows
 * instead of O(events) (a month of a 1M-event organization took ~176 ms of server CPU).
 *
 * - usage_meter_hours: per (org, meter, customer, UTC hour) the events the meter's filter matched:
 *   their count, the sum and the maximum of the property's numeric values, and the latest numeric
 *   value with its (ts, id) — the same tie-break as the `last` aggregation (ts, then the greater
 *   id). Sums and counts add up, maxima take the max, `last` the greatest (ts, id) over hours.
 * - usage_meter_hour_values: for `unique` meters, the distinct values per hour. A period's exact
 *   distinct count cannot be summed from hourly counts; it is count(DISTINCT value) over these rows,
 *   so it reads O(hours × distinct values per hour), never the events.
 *
 * Rollups are per meter (as Stripe's and OpenMeter's meters): ingest adds each inserted event to
 * every ACTIVE usage-event meter whose filter it matches, in the statement that inserts it (a
 * duplicate, not inserted, adds nothing). Creating a meter or changing its filter rebuilds its rows
 * from the events, under the organization's meter lock (taken shared by ingest), so no event falls
 * between the rebuild and the ingest that would add it. Archived meters are read from the events.
 *
 * Backfill: the ACTIVE usage-event meters' rows from the stored events, with usage_events and
 * meters locked in SHARE mode until the migration commits (writes wait, reads go on).
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE usage_meter_hours (
    org_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL REFERENCES meters(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    hour timestamptz NOT NULL,
    events bigint NOT NULL,
    total numeric NOT NULL,
    maximum numeric,
    last_ts timestamptz(3),
    last_id text COLLATE "C",
    last_value numeric,
    PRIMARY KEY (org_id, meter_id, customer_id, hour)
  )`);
  await db.raw(`CREATE TABLE usage_meter_hour_values (
    org_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL REFERENCES meters(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    hour timestamptz NOT NULL,
    value jsonb NOT NULL,
    PRIMARY KEY (org_id, meter_id, customer_id, hour, value)
  )`);
  if (!isEmbedded(db)) await db.raw('LOCK TABLE usage_events, meters IN SHARE MODE');
  const matched = `FROM meters m
    JOIN usage_events e ON e.org_id = m.org_id AND e.name = m.filter ->> 'eventName' AND e.properties @> coalesce(m.filter -> 'properties', '{}'::jsonb)
    CROSS JOIN LATERAL (SELECT e.properties -> m.property AS v) p
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(p.v) = 'number' THEN (p.v #>> '{}')::numeric END AS num) n
    WHERE m.source = 'EVENTS' AND m.status = 'ACTIVE'`;
  const hour = "date_bin('1 hour', e.ts, timestamptz '2000-01-01 00:00:00+00')";
  await db.raw(`INSERT INTO usage_meter_hours (org_id, meter_id, customer_id, hour, events, total, maximum, last_ts, last_id, last_value)
    SELECT m.org_id, m.id, e.customer_id, ${hour}, count(*), coalesce(sum(n.num), 0), max(n.num),
      (array_agg(e.ts ORDER BY e.ts DESC, e.id DESC) FILTER (WHERE n.num IS NOT NULL))[1],
      (array_agg(e.id ORDER BY e.ts DESC, e.id DESC) FILTER (WHERE n.num IS NOT NULL))[1],
      (array_agg(n.num ORDER BY e.ts DESC, e.id DESC) FILTER (WHERE n.num IS NOT NULL))[1]
    ${matched}
    GROUP BY m.org_id, m.id, e.customer_id, ${hour}`);
  await db.raw(`INSERT INTO usage_meter_hour_values (org_id, meter_id, customer_id, hour, value)
    SELECT DISTINCT m.org_id, m.id, e.customer_id, ${hour}, p.v
    ${matched} AND m.aggregation = 'unique' AND p.v IS NOT NULL`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE usage_meter_hour_values');
  await db.raw('DROP TABLE usage_meter_hours');
}
