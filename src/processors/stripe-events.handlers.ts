/**
 * POST /v1/processors/stripe/events on the merchant listener: where Stripe's webhook endpoint
 * points (docs/card-processors.md). Not an operation of the merchant API: Stripe authenticates
 * by signature over the raw body, so it is mounted beside the API, before JSON parsing.
 */
import express, { type Router } from 'express';
import type { StripeEventService } from './stripe-processor.js';

export const STRIPE_EVENTS_PATH = '/v1/processors/stripe/events';
/** Where a Connect endpoint ("events on connected accounts") points: its own signing secret, STRIPE_CONNECT_WEBHOOK_SECRET. */
export const STRIPE_CONNECT_EVENTS_PATH = '/v1/processors/stripe/connect-events';

export function registerStripeEventRoute(router: Router, events: StripeEventService, path = STRIPE_EVENTS_PATH): void {
  router.post(path, express.raw({ type: () => true, limit: '1mb' }), async (req, res, next) => {
    try {
      const payload = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const outcome = await events.receive(payload, req.header('stripe-signature'));
      res.status(200).json({ received: true, outcome });
    } catch (err) {
      next(err);
    }
  });
}
