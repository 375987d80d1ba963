/**
 * Order lines (issue 38): what an order charges, line by line, as commerce/pricing.ts priced it;
 * the order's amount_cents is the sum of its lines' amount_cents. Kinds: PRICE (a fixed fee ×
 * quantity), USAGE (a meter's quantity priced per unit / package / tiers, with included and
 * credited units), and CREDIT, DISCOUNT, PRORATION, TAX (amount lines, signed: credits and
 * discounts negative). Written in the order's transaction (orders.insert), never updated.
 *
 * Backfill: every existing order becomes one PRICE line — its product, amount and, when its
 * checkout session (or its subscription's first session) charged exactly that amount, the
 * session's quantity and unit amount; else quantity 1 at the order's amount. One INSERT … SELECT
 * into the table before its keys are built, linear in orders, without the pool's timeouts (like
 * 0210). It takes no lock that stops orders being written: an order an earlier release writes
 * during or after it (a rolling deploy) has no stored line and is read as the same single line,
 * derived on read (src/orders/order.repository.ts, derivedLine).
 */
import type { Knex } from 'knex';
import { isEmbedded } from '../dialect.js';

interface Connection {
  query(q: { text: string; query_timeout?: number }): Promise<unknown>;
}

/** A statement without node-postgres's client-side timeout nor the server's statement timeout. */
async function untimed(db: Knex, text: string): Promise<void> {
  if (isEmbedded(db)) return void (await db.raw(text));
  await db.raw('SET LOCAL statement_timeout = 0');
  const client = db.client as { acquireConnection(): Promise<Connection>; releaseConnection(c: Connection): Promise<unknown> };
  const connection = await client.acquireConnection();
  try {
    await connection.query({ text, query_timeout: 24 * 3600 * 1000 });
  } finally {
    await client.releaseConnection(connection);
  }
}

export async function up(db: Knex): Promise<void> {
  await db.raw(`CREATE TABLE order_lines (
    order_id text NOT NULL,
    position smallint NOT NULL,
    org_id text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('PRICE', 'USAGE', 'CREDIT', 'DISCOUNT', 'PRORATION', 'TAX')),
    description text NOT NULL,
    product_id text,
    price_id text,
    meter_id text,
    quantity numeric,
    included_units bigint,
    credited_units bigint,
    billable_quantity numeric,
    unit_amount numeric,
    pricing jsonb,
    tiers jsonb,
    exact_amount numeric NOT NULL,
    amount_cents bigint NOT NULL)`);
  await untimed(
    db,
    `INSERT INTO order_lines (order_id, position, org_id, kind, description, product_id, price_id, quantity, unit_amount, exact_amount, amount_cents)
     SELECT o.id, 0, o.org_id, 'PRICE', coalesce(o.product_name, 'Payment'), o.product_id, s.pricing->>'pricingId',
            CASE WHEN exact THEN s.quantity ELSE 1 END,
            CASE WHEN exact THEN o.amount_cents / s.quantity ELSE o.amount_cents END,
            o.amount_cents, o.amount_cents
       FROM orders o
       LEFT JOIN orders first ON first.id = o.original_order_id
       LEFT JOIN checkout_sessions s ON s.id = coalesce(o.checkout_session_id, first.checkout_session_id)
       CROSS JOIN LATERAL (SELECT coalesce(s.amount = o.amount_cents AND s.quantity > 0 AND o.amount_cents % s.quantity = 0, false) AS exact) q`,
  );
  await untimed(db, 'ALTER TABLE order_lines ADD PRIMARY KEY (order_id, position)');
  await untimed(db, 'ALTER TABLE order_lines ADD CONSTRAINT order_lines_order_fk FOREIGN KEY (order_id) REFERENCES orders(id) ON DELETE CASCADE');
}

export async function down(db: Knex): Promise<void> {
  await db.raw('DROP TABLE order_lines');
}
