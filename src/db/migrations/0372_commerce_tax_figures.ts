/**
 * Tax and discounts in the commerce metrics (issue 39, item 4: "metrics report net, tax and gross
 * separately"), kept flat (issue 40, item 1): the rollups of 0260/0370 gain three figures, read as
 * the others are (no commerce table on the read path).
 *
 * - `orders.tax_cents`: the tax an order's amount holds — the sum of its TAX lines' tax
 *   (`order_lines.tax->>'taxAmount'`: an exclusive line's amount, an inclusive line's included tax,
 *   0 for reverse charge). `orders.discount_cents`: the discount it was given (minus the sum of its
 *   DISCOUNT lines). Both are a function of the order's lines, which are written after the order's
 *   row (0240): a statement-level trigger on `order_lines` sets them on the orders whose lines a
 *   statement wrote (only when they differ, so the API's insert, which writes them with the row,
 *   costs no second write). Every writer is covered, as 0260's triggers cover every writer.
 * - The orders trigger of 0260 now also queues, per successful order (PAID or REFUNDED):
 *   `tax_volume` = tax_cents; `discount_volume` = discount_cents; `refunded_tax_volume` = the tax
 *   share of its refunds, **proportional, rounded once, half up, per order**:
 *   round(tax_cents × amount_refunded_cents ÷ amount_cents) — all of the tax for a full refund,
 *   none without a refund. One rule for every rail (docs/tax.md, "Metrics").
 *
 * Backfill: the columns are added (a constant default: no table rewrite), the triggers replaced,
 * then one UPDATE sets tax_cents and discount_cents of the orders that have TAX or DISCOUNT lines
 * (only those: taxed orders exist since 0360, discounts since 0340). That UPDATE goes through the
 * new orders trigger, so the figures of those orders are queued as changes like any other write:
 * readers add the queue at once (exact from the commit on), the commerce-rollups job folds it into
 * the quarter, hour, day and local-day rows. The ALTER of orders holds its lock until the
 * migration commits, so no order or line is written between the backfill and the triggers.
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';
import { FIGURES as FIGURES_0260, quarterOf, triggerFunction } from './0260_commerce_rollups.js';

/** The figures added here, after 0260's in every rollup and queue row. */
export const TAX_FIGURES = ['tax_volume', 'refunded_tax_volume', 'discount_volume'] as const;
const FIGURES = [...FIGURES_0260, ...TAX_FIGURES] as const;
type Figure = (typeof FIGURES)[number];

const TABLES = ['commerce_rollup_quarter', 'commerce_rollup_hour', 'commerce_rollup_day', 'commerce_rollup_local_day', 'commerce_metric_changes'];

/** An order's tax and discount from its lines (`l`): the rule both the trigger and the backfill use. */
export const LINE_TAX_SQL = "coalesce(sum(CASE WHEN l.kind = 'TAX' THEN coalesce((l.tax->>'taxAmount')::bigint, l.amount_cents) ELSE 0 END), 0)::bigint";
export const LINE_DISCOUNT_SQL = "coalesce(sum(CASE WHEN l.kind = 'DISCOUNT' THEN -l.amount_cents ELSE 0 END), 0)::bigint";

const SUCCESSFUL = "status IN ('PAID', 'REFUNDED')";
const figures = (values: Partial<Record<Figure, string>>) => FIGURES.map((f) => `${values[f] ?? '0'} AS ${f}`).join(', ');

/** An orders row's contribution (0260's, plus tax and discounts). */
const orderContributions = (s: string) => `SELECT org_id, created_at AS at, currency, ${figures({
  successful_payments: `(${SUCCESSFUL})::int`,
  gross_volume: `CASE WHEN ${SUCCESSFUL} THEN amount_cents ELSE 0 END`,
  refunded_volume: `CASE WHEN ${SUCCESSFUL} THEN amount_refunded_cents ELSE 0 END`,
  failed_payments: "(status = 'FAILED')::int",
  tax_volume: `CASE WHEN ${SUCCESSFUL} THEN tax_cents ELSE 0 END`,
  // The tax share of the refunds: proportional, rounded once, half up (round() of a non-negative numeric).
  refunded_tax_volume: `CASE WHEN ${SUCCESSFUL} AND amount_cents > 0 THEN round(tax_cents::numeric * amount_refunded_cents / amount_cents)::bigint ELSE 0 END`,
  discount_volume: `CASE WHEN ${SUCCESSFUL} THEN discount_cents ELSE 0 END`,
})} FROM ${s}`;

const SUMS = FIGURES.map((f) => `sum(${f})::bigint AS ${f}`).join(', ');
const ANY_NONZERO = FIGURES.map((f) => `sum(${f}) <> 0`).join(' OR ');

function ordersTriggerFunction(): string {
  const insert = (parts: string[]) => `INSERT INTO commerce_metric_changes (org_id, bucket, currency, ${FIGURES.join(', ')})
      SELECT org_id, ${quarterOf('at')}, currency, ${SUMS} FROM (${parts.join(' UNION ALL ')}) c
       GROUP BY 1, 2, 3 HAVING ${ANY_NONZERO};`;
  const negated = `SELECT org_id, at, currency, ${FIGURES.map((f) => `-${f} AS ${f}`).join(', ')} FROM (${orderContributions('old_rows')}) o`;
  const added = `SELECT * FROM (${orderContributions('new_rows')}) n`;
  return `CREATE OR REPLACE FUNCTION commerce_orders_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      ${insert([added])}
    ELSIF TG_OP = 'UPDATE' THEN
      ${insert([added, negated])}
    ELSE
      ${insert([negated])}
    END IF;
    RETURN NULL;
  END $fn$`;
}

/** The orders whose lines a statement touched get their tax and discount recomputed from all their lines. */
const setFromLines = (ids: string) => `UPDATE orders o SET tax_cents = s.tax, discount_cents = s.discount
      FROM (SELECT i.order_id, ${LINE_TAX_SQL} AS tax, ${LINE_DISCOUNT_SQL} AS discount
              FROM (${ids}) i LEFT JOIN order_lines l ON l.order_id = i.order_id GROUP BY i.order_id) s
     WHERE o.id = s.order_id AND (o.tax_cents <> s.tax OR o.discount_cents <> s.discount);`;
const KINDS = "kind IN ('TAX', 'DISCOUNT')";

const LINES_FUNCTION = `CREATE OR REPLACE FUNCTION commerce_order_lines_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      ${setFromLines(`SELECT DISTINCT order_id FROM new_rows WHERE ${KINDS}`)}
    ELSIF TG_OP = 'UPDATE' THEN
      ${setFromLines(`SELECT order_id FROM new_rows WHERE ${KINDS} UNION SELECT order_id FROM old_rows WHERE ${KINDS}`)}
    ELSE
      ${setFromLines(`SELECT DISTINCT order_id FROM old_rows WHERE ${KINDS}`)}
    END IF;
    RETURN NULL;
  END $fn$`;

export async function up(db: Knex): Promise<void> {
  if (!isEmbedded(db)) await db.raw('SET LOCAL statement_timeout = 0');
  await db.raw('ALTER TABLE orders ADD COLUMN tax_cents bigint NOT NULL DEFAULT 0, ADD COLUMN discount_cents bigint NOT NULL DEFAULT 0');
  for (const table of TABLES) await db.raw(`ALTER TABLE ${table} ${TAX_FIGURES.map((f) => `ADD COLUMN ${f} bigint NOT NULL DEFAULT 0`).join(', ')}`);
  await db.raw(ordersTriggerFunction());
  await db.raw(LINES_FUNCTION);
  await db.raw('CREATE TRIGGER order_lines_commerce_insert AFTER INSERT ON order_lines REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_order_lines_changed()');
  await db.raw('CREATE TRIGGER order_lines_commerce_update AFTER UPDATE ON order_lines REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_order_lines_changed()');
  await db.raw('CREATE TRIGGER order_lines_commerce_delete AFTER DELETE ON order_lines REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION commerce_order_lines_changed()');
  // Through the new orders trigger: the backfilled orders' figures are queued like any write.
  await db.raw(`UPDATE orders o SET tax_cents = s.tax, discount_cents = s.discount
      FROM (SELECT l.order_id, ${LINE_TAX_SQL} AS tax, ${LINE_DISCOUNT_SQL} AS discount FROM order_lines l WHERE l.${KINDS} GROUP BY l.order_id) s
     WHERE o.id = s.order_id AND (s.tax <> 0 OR s.discount <> 0)`);
}

export async function down(db: Knex): Promise<void> {
  for (const op of ['insert', 'update', 'delete']) await db.raw(`DROP TRIGGER IF EXISTS order_lines_commerce_${op} ON order_lines`);
  await db.raw('DROP FUNCTION IF EXISTS commerce_order_lines_changed()');
  await db.raw(triggerFunction('orders'));
  for (const table of TABLES) await db.raw(`ALTER TABLE ${table} ${TAX_FIGURES.map((f) => `DROP COLUMN IF EXISTS ${f}`).join(', ')}`);
  await db.raw('ALTER TABLE orders DROP COLUMN IF EXISTS tax_cents, DROP COLUMN IF EXISTS discount_cents');
}
