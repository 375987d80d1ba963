/**
 * Kassa's signed `order.*` webhooks as a merchant receives them: a real HTTPS receiver
 * (../webhooks/receiver.ts) subscribed through the merchant API, Kassa's delivery worker run on
 * demand, and each delivery's signature checked with node:crypto against the published key.
 */
import { expect } from 'vitest';
import type { WebhookOrder } from '../../src/webhooks/webhook.model.js';
import { createLogger } from '../../src/kernel/logger.js';
import { DeliveryWorker } from '../../src/webhooks/delivery.worker.js';
import { KnexWebhookDeliveryRepository } from '../../src/webhooks/deliveries.repository.js';
import { UrlGuard } from '../../src/webhooks/url-guard.js';
import type { TestContext } from '../harness/context.js';
import { RECEIVER_CERT, startReceiver, verifyWithNodeCrypto, type Jwk } from '../webhooks/receiver.js';

export interface OrderWebhooks {
  /** Delivers what is due and answers the verified `order.*` payloads received about the order, oldest first. */
  received(orderId: string): Promise<Array<{ type: string; order: WebhookOrder }>>;
  /** The same with each event's whole `data` (`refund`, `dispute` beside `order`). */
  receivedWithData(orderId: string): Promise<Array<{ type: string; order: WebhookOrder; data: Record<string, unknown> }>>;
  /** Delivers what is due and answers every verified delivery received, oldest first. */
  all(): Promise<Array<{ type: string; data: Record<string, unknown>; webhookId: string; body: unknown }>>;
  close(): Promise<void>;
}

export async function receiveOrderWebhooks(ctx: TestContext, events: string[] = ['order.paid', 'order.pending', 'order.failed']): Promise<OrderWebhooks> {
  const receiver = await startReceiver();
  const created = await ctx.merchant
    .post('/v1/webhook')
    .set('X-API-Key', ctx.orgA.apiKey)
    .send({ name: 'Order receiver', url: receiver.url('/orders'), events });
  expect(created.status).toBe(201);
  const worker = new DeliveryWorker(new KnexWebhookDeliveryRepository(ctx.testDb.database.db), ctx.services.signingKeys, new UrlGuard({ allowLoopback: true }), ctx.clock, createLogger({ level: 'silent' }), {
    timeoutMs: 2000,
    ca: RECEIVER_CERT,
    random: () => 0.5,
  });
  const result: OrderWebhooks = {
    async received(orderId) {
      return (await result.receivedWithData(orderId)).map(({ type, order }) => ({ type, order }));
    },
    async receivedWithData(orderId) {
      while ((await worker.runOnce()) > 0);
      const keys = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data.keys as Jwk[];
      return receiver.received
        .filter((r) => r.json?.data?.order?.orderId === orderId)
        .map((r) => {
          expect(verifyWithNodeCrypto(r, keys)).not.toEqual([]);
          return { type: r.json.type as string, order: r.json.data.order as WebhookOrder, data: r.json.data as Record<string, unknown> };
        });
    },
    async all() {
      while ((await worker.runOnce()) > 0);
      const keys = (await ctx.platform.get('/v1/webhooks/signing-key')).body.data.keys as Jwk[];
      return receiver.received.map((r) => {
        expect(verifyWithNodeCrypto(r, keys)).not.toEqual([]);
        return { type: r.json.type as string, data: r.json.data as Record<string, unknown>, webhookId: String(r.headers['webhook-id']), body: r.json as unknown };
      });
    },
    close: () => receiver.close(),
  };
  return result;
}
