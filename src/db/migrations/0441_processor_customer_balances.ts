/**
 * Kassa's mirror of a processor's customer balance (issue 39, docs/plan-changes.md "Credit balance
 * on Stripe"). On Stripe the credit an immediate downgrade leaves is held by Stripe (the Stripe
 * customer's `balance`), and Stripe applies it to any invoice of that customer; Kassa records each
 * move Stripe reports on an invoice it writes an order for (`ending_balance − starting_balance`),
 * so the mirror of a Stripe customer is minus Stripe's balance. Kept apart from the sandbox's
 * `customer_balances` (0445): the key is the processor's customer, which Kassa's sandbox renewals
 * never draw, and a Kassa customer may stand behind several Stripe customers.
 * - `processor_customer_balances`: the credit (≥ 0) per (organization, processor customer, currency).
 * - `processor_customer_balance_entries`: one row per move and order: CARRIED (a negative invoice's
 *   credit), APPLIED (an invoice drew it), ADJUSTED (a credit granted in the processor outside
 *   Kassa, found when an invoice drew more than the mirror held).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE processor_customer_balances (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    processor_customer_id text COLLATE "C" NOT NULL,
    currency text COLLATE "C" NOT NULL,
    customer_id text COLLATE "C" NOT NULL,
    amount_cents bigint NOT NULL CHECK (amount_cents >= 0),
    updated_at timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, processor_customer_id, currency)
  )`);
  await db.raw(`CREATE TABLE processor_customer_balance_entries (
    id text COLLATE "C" PRIMARY KEY,
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    processor_customer_id text COLLATE "C" NOT NULL,
    currency text COLLATE "C" NOT NULL,
    kind text NOT NULL CHECK (kind IN ('CARRIED', 'APPLIED', 'ADJUSTED')),
    amount_cents bigint NOT NULL,
    order_id text COLLATE "C" NOT NULL,
    subscription_id text COLLATE "C",
    processor_invoice_id text COLLATE "C",
    created_at timestamptz(3) NOT NULL
  )`);
  await db.raw('CREATE UNIQUE INDEX processor_customer_balance_entries_order ON processor_customer_balance_entries (order_id, kind)');
  await db.raw('CREATE INDEX processor_customer_balance_entries_subscription ON processor_customer_balance_entries (subscription_id)');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE IF EXISTS processor_customer_balance_entries');
  await db.raw('DROP TABLE IF EXISTS processor_customer_balances');
}
