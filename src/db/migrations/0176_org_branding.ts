/**
 * An organization's branding (issue 29, console settings): a logo (an https URL) and an accent
 * colour (`#rrggbb`) shown on its hosted checkout pages, its customer portal and its buyer
 * e-mails. Null: Kassa's defaults.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`ALTER TABLE organizations
    ADD COLUMN brand_logo_url text CHECK (brand_logo_url IS NULL OR (brand_logo_url LIKE 'https://%' AND length(brand_logo_url) <= 2048)),
    ADD COLUMN brand_accent_color text CHECK (brand_accent_color IS NULL OR brand_accent_color ~ '^#[0-9a-f]{6}$')`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE organizations DROP COLUMN brand_logo_url, DROP COLUMN brand_accent_color');
}
