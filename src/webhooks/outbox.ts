/**
 * The transactional outbox: the one call other domains make to emit a webhook event.
 *
 * Usage (orders, subscriptions):
 *
 *   await db.transaction(async (trx) => {
 *     await updateOrderRow(trx, ...);
 *     await enqueueWebhookEvent(trx, { orgId, type: 'order.paid', data: { order } }, now);
 *   });
 *
 * The event row and one delivery per matching enabled endpoint are written with the caller's
 * transaction, so the state change and its event commit (or roll back) together: an order can
 * never be PAID without its `order.paid` queued, and no event is ever sent for a change that
 * did not commit. The delivery worker picks the deliveries up afterwards.
 */
export type { WebhookEventType, OutboxEvent, WebhookOrder, WebhookSubscription } from './webhooks.repository.js';
export { enqueueWebhookEvent } from './webhooks.repository.js';
