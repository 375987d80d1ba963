/**
 * Prepaid credits (issue 38 §5 credit packs, §6 balances):
 * - `prices.grants_units`: a ONE_TIME price that grants units of a meter when paid (a credit
 *   pack), `{meterId, units}` or NULL. Snapshotted into the checkout session's pricing, like every
 *   other price term, so the grant is what the buyer was shown.
 * - `usage_credit_balances`: one row per (organization, customer, meter) holding the credit units
 *   not yet drawn (grants − revocations − draws). Every change locks and updates this row in the
 *   transaction that writes its ledger entry, so concurrent grants, draws and revocations
 *   serialize on it and the balance is read in one index probe. `since`: the first grant's time
 *   (a prepaid meter's consumption is counted from it).
 * - `usage_credit_entries`: the ledger, one row per change. Exactly once by unique indexes: one
 *   GRANT and one REVOKE per order (a repeated or concurrent payment result inserts nothing), one
 *   DRAW per (subscription, billing period, meter) (a rerun of a period close draws nothing more).
 * - `usage_balance_alerts`: the balance webhooks already sent, one row per (customer, meter,
 *   period key, kind): the insert that claims it is the condition of the event (exactly once
 *   under concurrent ingest).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE prices ADD COLUMN grants_units jsonb');
  await db.raw(`CREATE TABLE usage_credit_balances (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL,
    units bigint NOT NULL CHECK (units >= 0),
    since timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, customer_id, meter_id)
  )`);
  await db.raw(`CREATE TABLE usage_credit_entries (
    id text COLLATE "C" PRIMARY KEY,
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL,
    kind text NOT NULL CHECK (kind IN ('GRANT', 'REVOKE', 'DRAW')),
    units bigint NOT NULL,
    order_id text COLLATE "C",
    subscription_id text COLLATE "C",
    billing_period integer,
    created_at timestamptz(3) NOT NULL
  )`);
  await db.raw("CREATE UNIQUE INDEX usage_credit_entries_order ON usage_credit_entries (order_id, kind) WHERE kind IN ('GRANT', 'REVOKE')");
  await db.raw("CREATE UNIQUE INDEX usage_credit_entries_draw ON usage_credit_entries (subscription_id, billing_period, meter_id) WHERE kind = 'DRAW'");
  await db.raw('CREATE INDEX usage_credit_entries_customer ON usage_credit_entries (org_id, customer_id, meter_id, created_at)');
  await db.raw(`CREATE TABLE usage_balance_alerts (
    org_id text COLLATE "C" NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    customer_id text COLLATE "C" NOT NULL,
    meter_id text COLLATE "C" NOT NULL,
    period_key text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    sent_at timestamptz(3) NOT NULL,
    PRIMARY KEY (org_id, customer_id, meter_id, period_key, kind)
  )`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE usage_balance_alerts');
  await db.raw('DROP TABLE usage_credit_entries');
  await db.raw('DROP TABLE usage_credit_balances');
  await db.raw('ALTER TABLE prices DROP COLUMN grants_units');
}
