/**
 * The customer credit balance (issue 39, docs/plan-changes.md "Credit balance"), as Stripe keeps its
 * customer balance: one amount per (organization, customer, currency), never below 0, that an
 * immediate downgrade's credit for unused time adds to and the customer's next renewal orders draw
 * from (a `CREDIT` line) until it is used up.
 * - `customer_balances`: the amount; every change locks and updates its row in the transaction of
 *   the order that causes it (a downgrade and a renewal serialize on it).
 * - `customer_balance_entries`: the ledger, one row per change, at most one per (order, kind):
 *   CARRIED (a downgrade's order moved its negative net here), APPLIED (an order drew it),
 *   RESTORED (an order that drew it was never paid: given back).
 * - `order_lines.kind` takes `BALANCE`: the line of a downgrade's order that carries its credit to
 *   the balance (docs/order-lines.md).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE customer_balances (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    currency text COLLATE "C" NOT NULL,
    amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
    updated_at timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, customer_id, currency)
  )`);
  await db.raw(`CREATE TABLE customer_balance_entries (
    id text COLLATE "C" PRIMARY KEY,
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    currency text COLLATE "C" NOT NULL,
    kind text NOT NULL CHECK (kind IN ('CARRIED', 'APPLIED', 'RESTORED')),
    amount_cents bigint NOT NULL,
    order_id text COLLATE "C" NOT NULL,
    subscription_id text COLLATE "C",
    created_at timestamptz(3) NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX customer_balance_entries_order ON customer_balance_entries (order_id, kind)');
  await db.raw('ALTER TABLE order_lines DROP CONSTRAINT order_lines_kind_check');
  await db.raw(`ALTER TABLE order_lines ADD CONSTRAINT order_lines_kind_check CHECK (kind IN ('PRICE', 'USAGE', 'CREDIT', 'DISCOUNT', 'PRORATION', 'TAX', 'BALANCE'))`);
  await db.raw('CREATE INDEX customer_balance_entries_customer ON customer_balance_entries (org_id, customer_id, currency, created_at)');
}

export async function down(db: Knex): Promise<void> {
  // Lines of kind BALANCE (if any) must be removed by hand before going down: the old check refuses them.
  await db.raw('ALTER TABLE order_lines DROP CONSTRAINT order_lines_kind_check');
  await db.raw(`ALTER TABLE order_lines ADD CONSTRAINT order_lines_kind_check CHECK (kind IN ('PRICE', 'USAGE', 'CREDIT', 'DISCOUNT', 'PRORATION', 'TAX'))`);
  await db.raw('DROP TABLE IF EXISTS customer_balance_entries');
  await db.raw('DROP TABLE IF EXISTS customer_balances');
}
