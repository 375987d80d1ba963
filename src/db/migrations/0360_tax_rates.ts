/**
 * Tax rates (issue 39, item 4). `tax_rates`: the merchant's rates, by buyer country (ISO 3166-1
 * alpha-2) and optional region (ISO 3166-2 subdivision part), a percentage kept as exact decimal
 * text (at most 4 fraction digits, as Stripe), inclusive or exclusive, ACTIVE or ARCHIVED; a
 * rate's percentage, country and inclusiveness never change (orders snapshot them; archive and
 * create another). `stripe_tax_rate_id`: the Stripe tax rate made for it on the Stripe rail
 * (written once, by a conditional UPDATE … WHERE stripe_tax_rate_id IS NULL).
 * `organizations.tax_country`: the merchant's own country (EU reverse charge needs it).
 * `checkout_sessions.tax`: the buyer's location and the rates chosen for it (jsonb snapshot).
 * `order_lines.tax`: what a TAX line shows (rate, taxable amount, tax, reverse charge).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE tax_rates (
    id text PRIMARY KEY,
    org_id text NOT NULL REFERENCES organizations(id),
    display_name text NOT NULL,
    percentage text NOT NULL,
    inclusive boolean NOT NULL,
    country text NOT NULL CHECK (country ~ '^[A-Z]{2}$'),
    region text CHECK (region ~ '^[A-Z0-9]{1,3}$'),
    description text,
    status text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'ARCHIVED')),
    stripe_tax_rate_id text,
    created_at timestamptz(3) NOT NULL,
    updated_at timestamptz(3) NOT NULL,
    archived_at timestamptz(3))`);
  await db.raw('CREATE INDEX tax_rates_org_country ON tax_rates (org_id, country, status)');
  await db.raw('ALTER TABLE organizations ADD COLUMN tax_country text CHECK (tax_country ~ \'^[A-Z]{2}$\')');
  await db.raw('ALTER TABLE checkout_sessions ADD COLUMN tax jsonb');
  await db.raw('ALTER TABLE order_lines ADD COLUMN tax jsonb');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE order_lines DROP COLUMN IF EXISTS tax');
  await db.raw('ALTER TABLE checkout_sessions DROP COLUMN IF EXISTS tax');
  await db.raw('ALTER TABLE organizations DROP COLUMN IF EXISTS tax_country');
  await db.raw('DROP TABLE IF EXISTS tax_rates');
}
