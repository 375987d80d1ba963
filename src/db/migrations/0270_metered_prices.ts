/**
 * Metered prices (issue 38 §5): a SUBSCRIPTION price's metered components, billed in arrears at
 * renewal (src/commerce/metered-billing.ts). One jsonb column, null for prices without any: the
 * components are read with their price (never queried by meter), prices never change once made,
 * and a meter's row is not referenced by a key (an archived meter stays billable by the prices
 * that name it). Shape: [{meterId, includedUnits, pricing: {model, unitAmount | packageSize +
 * packageAmount | tiers[{upTo, unitAmount, flatAmount?}]}}] (pricing.ts's UsagePricing).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE prices ADD COLUMN metered_components jsonb');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE prices DROP COLUMN metered_components');
}
