/**
 * Usage billing (issue 38): customers named by the merchant's own id, usage events deduplicated by
 * their id within the organization, and meters.
 * - `customers.external_id`: unique per organization when set (a partial unique index, so any
 *   number of customers may have none).
 * - `checkout_sessions.customer_external_id`: given at session creation, attached to the customer
 *   the payment finds or creates.
 * - `usage_events`: the primary key (org_id, id) is the deduplication (`INSERT … ON CONFLICT DO
 *   NOTHING`); meters read (org_id, customer_id, name, ts) by the second index.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE customers ADD COLUMN external_id text');
  await db.raw('CREATE UNIQUE INDEX customers_org_external_id ON customers (org_id, external_id) WHERE external_id IS NOT NULL');
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN customer_external_id text');
  await db.raw(`CREATE TABLE usage_events (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    id text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    ts timestamptz(3) NOT NULL,
    properties jsonb NOT NULL,
    received_at timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, id)
  )`);
  await db.raw('CREATE INDEX usage_events_customer_name_ts ON usage_events (org_id, customer_id, name, ts)');
  await db.raw(`CREATE TABLE meters (
    id text COLLATE "C" PRIMARY KEY,
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name text NOT NULL,
    source text NOT NULL CHECK (source IN ('EVENTS', 'SPANS')),
    filter jsonb NOT NULL,
    aggregation text NOT NULL CHECK (aggregation IN ('count', 'sum', 'max', 'unique', 'last')),
    property text,
    customer_attribute text,
    status text NOT NULL CHECK (status IN ('ACTIVE', 'ARCHIVED')),
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    archived_at timestamptz(3)
  )`);
  await db.raw('CREATE INDEX meters_org_created ON meters (org_id, created_at DESC, id DESC)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE meters');
  await db.raw('DROP TABLE usage_events');
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN customer_external_id');
  await db.raw('DROP INDEX customers_org_external_id');
  await db.raw('ALTER TABLE customers DROP COLUMN external_id');
}
