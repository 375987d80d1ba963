/**
 * An order's payment as its card processor reports it (`providerStatus` in the API): the Stripe
 * PaymentIntent's status, or the sandbox payment's in the same vocabulary. The PaymentIntent id
 * itself is already stored (`processor_payment_id`).
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE orders ADD COLUMN processor_status text');
  // Orders paid before: the status their order status implies (a PAID or REFUNDED order's payment
  // succeeded, a PENDING one is processing, a FAILED one asks for another payment method).
  await db.raw(`UPDATE orders SET processor_status = CASE status
      WHEN 'PAID' THEN 'succeeded' WHEN 'REFUNDED' THEN 'succeeded' WHEN 'PENDING' THEN 'processing' WHEN 'FAILED' THEN 'requires_payment_method' END
    WHERE provider = 'STRIPE' AND processor_payment_id IS NOT NULL`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE orders DROP COLUMN processor_status');
}
