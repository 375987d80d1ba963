/**
 * A narrower index on the rollup delta queues (issue 38: usage-event ingest ≥ 30,000 events/s, where
 * PostgreSQL's CPU per event caps the rate; figures in docs/benchmarks.md, "Ingest: where
 * PostgreSQL's CPU per event goes; a cheaper fold and queue index").
 *
 * Ingest appends one delta row per (meter, customer, hour) a batch touches (migration 0395): in the
 * worst case — each customer once per batch — two rows per event with two meters, each with an
 * entry in `usage_meter_hour_deltas_key (org_id, meter_id, customer_id, hour)`. That index entry
 * (~110 bytes of three text ids and the hour) was about half of what the queue cost ingest. The
 * index becomes `(customer_id, hour)`: every reader of the queue names one customer (a customer's
 * quantity, access check, balances, thresholds, the close) and the hour range, and filters the
 * organization and meter on the customer's few queued rows (a customer id is unique across
 * organizations); the fold takes an organization's rows by a scan of the queue as before, and a
 * meter's build deletes its customer range through the same index. The same for
 * `usage_meter_hour_value_deltas`.
 *
 * Safe on an existing install: the new indexes are built CONCURRENTLY (the queues are small: rows
 * live until the next fold pass) before the old ones are dropped CONCURRENTLY; ingest and reads
 * run on throughout.
 */
import type { Knex } from 'knex';
import { create, drop } from './0120_list_indexes.js';

export const config = { transaction: false };

const NARROW: Array<[string, string]> = [
  ['usage_meter_hour_deltas_customer', 'usage_meter_hour_deltas (customer_id, hour)'],
  ['usage_meter_hour_value_deltas_customer', 'usage_meter_hour_value_deltas (customer_id, hour)'],
];
const WIDE: Array<[string, string]> = [
  ['usage_meter_hour_deltas_key', 'usage_meter_hour_deltas (org_id, meter_id, customer_id, hour)'],
  ['usage_meter_hour_value_deltas_key', 'usage_meter_hour_value_deltas (org_id, meter_id, customer_id, hour)'],
];

export async function up(db: Knex): Promise<void> {
  await create(db, NARROW);
  await drop(db, WIDE);
}

export async function down(db: Knex): Promise<void> {
  await create(db, WIDE);
  await drop(db, NARROW);
}
