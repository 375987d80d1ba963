/**
 * Migrations are listed here, in order, instead of being discovered on disk: the same list works
 * under tsx, in tests and from knexfile.ts, with no file-extension guessing.
 */
import type { Knex } from 'knex';
import * as m0001 from './0001_organizations.js';
import * as m0002 from './0002_webhook_signing_keys.js';
import * as m0003 from './0003_catalog.js';
import * as m0004 from './0004_checkout_orders.js';
import * as m0005 from './0005_subscriptions.js';
import * as m0010 from './0010_telemetry.js';
import * as m0020 from './0020_agent_wallet.js';
import * as m0030 from './0030_webhooks.js';
import * as m0040 from './0040_crypto_payments.js';
import * as m0050 from './0050_telemetry_long_durations.js';
import * as m0060 from './0060_webhook_event_retention.js';
import * as m0070 from './0070_encryption_key_check.js';
import * as m0071 from './0071_telemetry_span_document_keys.js';
import * as m0072 from './0072_organization_display_name.js';
import * as m0073 from './0073_stripe_card_processor.js';
import * as m0074 from './0074_stripe_subscriptions.js';
import * as m0076 from './0076_stripe_event_reconciliation.js';
import * as m0078 from './0078_stripe_connected_accounts.js';
import * as m0081 from './0081_x402.js';
import * as m0082 from './0082_order_processor_status.js';
import * as m0084 from './0084_x402_paywalls.js';
import * as m0088 from './0088_telemetry_five_minute_rollups.js';
import * as m0089 from './0089_telemetry_ten_second_rollups.js';
import * as m0105 from './0105_x402_relayer_nonces.js';
import * as m0120 from './0120_list_indexes.js';
import * as m0130 from './0130_order_refunds_disputes.js';
import * as m0131 from './0131_subscription_payment_action.js';
import * as m0132 from './0132_stripe_account_state.js';
import * as m0140 from './0140_customer_portal_sessions.js';
import * as m0141 from './0141_buyer_emails.js';
import * as m0150 from './0150_accounts.js';
import * as m0170 from './0170_passkeys.js';
import * as m0175 from './0175_refund_idempotency_keys.js';
import * as m0176 from './0176_org_branding.js';
import * as m0180 from './0180_console_developer_lists.js';
import * as m0190 from './0190_telemetry_explorer.js';
import * as m0195 from './0195_wallet_count_index_only.js';
import * as m0196 from './0196_commerce_metrics_covering.js';
import * as m0200 from './0200_order_tx_hash_index.js';
import * as m0201 from './0201_org_time_zone.js';
import * as m0210 from './0210_telemetry_sessions.js';
import * as m0211 from './0211_telemetry_group_changes.js';
import * as m0220 from './0220_session_strength.js';
import * as m0225 from './0225_member_credentials.js';
import * as m0230 from './0230_portal_session_scope.js';
import * as m0240 from './0240_order_lines.js';
import * as m0250 from './0250_usage_billing.js';
import * as m0260 from './0260_commerce_rollups.js';
import * as m0261 from './0261_order_merchant_reference_trigram.js';
import * as m0262 from './0262_list_statistics.js';
import * as m0263 from './0263_subscriptions_manage_keys.js';
import * as m0270 from './0270_metered_prices.js';
import * as m0280 from './0280_usage_meter_rollups.js';
import * as m0285 from './0285_subscription_usage_close.js';
import * as m0290 from './0290_telemetry_span_partitions.js';
import * as m0300 from './0300_trials.js';
import * as m0310 from './0310_usage_credits.js';
import * as m0320 from './0320_processor_usage_invoices.js';
import * as m0335 from './0335_meter_rollup_builds.js';
import * as m0340 from './0340_discounts.js';
import * as m0350 from './0350_plan_changes.js';
import * as m0356 from './0356_redemption_release.js';
import * as m0360 from './0360_tax_rates.js';
import * as m0370 from './0370_commerce_local_days.js';
import * as m0371 from './0371_order_wallet_statistics.js';
import * as m0372 from './0372_commerce_tax_figures.js';
import * as m0380 from './0380_usage_event_partitions.js';
import * as m0381 from './0381_span_meter_rollups.js';
import * as m0385 from './0385_usage_ingest_costs.js';
import * as m0390 from './0390_telemetry_trace_partitions.js';
import * as m0391 from './0391_span_meter_points.js';
import * as m0395 from './0395_usage_rollup_deltas.js';
import * as m0399 from './0399_checkout_location_step.js';
import * as m0402 from './0402_usage_makeup_retries.js';
import * as m0404 from './0404_commerce_rollup_time_of_day.js';
import * as m0410 from './0410_processor_plan_sync.js';
import * as m0411 from './0411_redemption_orphan_sweep.js';
import * as m0415 from './0415_usage_makeup_invoices.js';
import * as m0425 from './0425_pending_plan_changes.js';
import * as m0435 from './0435_usage_delta_customer_index.js';
import * as m0440 from './0440_commerce_kept_zones.js';
import * as m0441 from './0441_processor_customer_balances.js';
import * as m0445 from './0445_customer_balances.js';
import * as m0446 from './0446_usage_invoice_plan.js';
import * as m0450 from './0450_subscription_usage_segments.js';
import * as m0451 from './0451_customer_balance_adjustments.js';
import * as m0460 from './0460_commerce_kept_zone_eviction.js';
import * as m0461 from './0461_commerce_kept_zone_canonical_names.js';

export interface Migration {
  up(db: Knex): Promise<void>;
  down(db: Knex): Promise<void>;
  /** `{ transaction: false }` runs the migration outside a transaction (knex's per-migration option). */
  config?: { transaction?: boolean };
}

const MIGRATIONS: Record<string, Migration> = {
  '0001_organizations': m0001,
  '0002_webhook_signing_keys': m0002,
  '0003_catalog': m0003,
  '0004_checkout_orders': m0004,
  '0005_subscriptions': m0005,
  '0010_telemetry': m0010,
  '0020_agent_wallet': m0020,
  '0030_webhooks': m0030,
  '0040_crypto_payments': m0040,
  '0050_telemetry_long_durations': m0050,
  '0060_webhook_event_retention': m0060,
  '0070_encryption_key_check': m0070,
  '0071_telemetry_span_document_keys': m0071,
  '0072_organization_display_name': m0072,
  '0073_stripe_card_processor': m0073,
  '0074_stripe_subscriptions': m0074,
  '0076_stripe_event_reconciliation': m0076,
  '0078_stripe_connected_accounts': m0078,
  '0081_x402': m0081,
  '0082_order_processor_status': m0082,
  '0084_x402_paywalls': m0084,
  '0088_telemetry_five_minute_rollups': m0088,
  '0089_telemetry_ten_second_rollups': m0089,
  '0105_x402_relayer_nonces': m0105,
  '0120_list_indexes': m0120,
  '0130_order_refunds_disputes': m0130,
  '0131_subscription_payment_action': m0131,
  '0132_stripe_account_state': m0132,
  '0140_customer_portal_sessions': m0140,
  '0141_buyer_emails': m0141,
  '0150_accounts': m0150,
  '0170_passkeys': m0170,
  '0175_refund_idempotency_keys': m0175,
  '0176_org_branding': m0176,
  '0180_console_developer_lists': m0180,
  '0190_telemetry_explorer': m0190,
  '0195_wallet_count_index_only': m0195,
  '0196_commerce_metrics_covering': m0196,
  '0200_order_tx_hash_index': m0200,
  '0201_org_time_zone': m0201,
  '0210_telemetry_sessions': m0210,
  '0211_telemetry_group_changes': m0211,
  '0220_session_strength': m0220,
  '0225_member_credentials': m0225,
  '0230_portal_session_scope': m0230,
  '0240_order_lines': m0240,
  '0250_usage_billing': m0250,
  '0260_commerce_rollups': m0260,
  '0261_order_merchant_reference_trigram': m0261,
  '0262_list_statistics': m0262,
  '0263_subscriptions_manage_keys': m0263,
  '0270_metered_prices': m0270,
  '0280_usage_meter_rollups': m0280,
  '0285_subscription_usage_close': m0285,
  '0290_telemetry_span_partitions': m0290,
  '0300_trials': m0300,
  '0310_usage_credits': m0310,
  '0320_processor_usage_invoices': m0320,
  '0335_meter_rollup_builds': m0335,
  '0340_discounts': m0340,
  '0350_plan_changes': m0350,
  '0356_redemption_release': m0356,
  '0360_tax_rates': m0360,
  '0370_commerce_local_days': m0370,
  '0371_order_wallet_statistics': m0371,
  '0372_commerce_tax_figures': m0372,
  '0380_usage_event_partitions': m0380,
  '0381_span_meter_rollups': m0381,
  '0385_usage_ingest_costs': m0385,
  '0390_telemetry_trace_partitions': m0390,
  '0391_span_meter_points': m0391,
  '0395_usage_rollup_deltas': m0395,
  '0399_checkout_location_step': m0399,
  '0402_usage_makeup_retries': m0402,
  '0404_commerce_rollup_time_of_day': m0404,
  '0410_processor_plan_sync': m0410,
  '0411_redemption_orphan_sweep': m0411,
  '0415_usage_makeup_invoices': m0415,
  '0425_pending_plan_changes': m0425,
  '0435_usage_delta_customer_index': m0435,
  '0440_commerce_kept_zones': m0440,
  '0441_processor_customer_balances': m0441,
  '0445_customer_balances': m0445,
  '0446_usage_invoice_plan': m0446,
  '0450_subscription_usage_segments': m0450,
  '0451_customer_balance_adjustments': m0451,
  '0460_commerce_kept_zone_eviction': m0460,
  '0461_commerce_kept_zone_canonical_names': m0461,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(MIGRATIONS),
  getMigrationName: (name) => name,
  getMigration: async (name) => MIGRATIONS[name]!,
};
