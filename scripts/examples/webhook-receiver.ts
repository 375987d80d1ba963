/**
 * The smallest webhook receiver that is safe to trust: it verifies every delivery's Ed25519
 * signature over the RAW body against Kassa's published signing key before reading it, and that
 * the delivery is for this receiver's organization (one signing key serves every organization of
 * a Kassa server, so a signature alone does not say whom a delivery is for), answers 401 when
 * either fails and 204 otherwise, and prints one line per event. The README's quick start runs it
 * with `webhook listen --forward`; copy it into your backend as a starting point.
 *
 *   KASSA_ORG=ORG_… npx tsx scripts/examples/webhook-receiver.ts   # http://localhost:4000/webhooks/kassa
 *
 * KASSA_ORG (required) is your organization (`npm start` printed it; `GET /v1/me` answers it).
 * KASSA_WEBHOOK_ENDPOINT_ID (optional, `WHE_…`) also refuses deliveries made to your other
 * endpoints. PORT (default 4000) and KASSA_API_URL (default http://localhost:3001, where the
 * signing key is published) change where it listens and where it fetches the key.
 */
import express from 'express';
import { WebhookVerificationError, WebhookVerifier, type WebhookEvent } from '../../src/client/index.js';

const port = Number(process.env.PORT ?? 4000);
const apiUrl = process.env.KASSA_API_URL ?? 'http://localhost:3001';
const orgId = process.env.KASSA_ORG;
if (!orgId) {
  console.error('Set KASSA_ORG to your organization id (ORG_…, printed by npm start, or data.orgId of GET /v1/me): deliveries for any other organization are refused.');
  process.exit(1);
}

const verifier = new WebhookVerifier({
  signingKeyUrl: `${apiUrl}/v1/webhooks/signing-key`,
  expectedOrganizationId: orgId,
  ...(process.env.KASSA_WEBHOOK_ENDPOINT_ID ? { expectedEndpointId: process.env.KASSA_WEBHOOK_ENDPOINT_ID } : {}),
});
const app = express();

// express.raw, never express.json: re-serialized JSON no longer matches the signature.
app.post('/webhooks/kassa', express.raw({ type: 'application/json', limit: '1mb' }), async (req, res) => {
  let event: WebhookEvent;
  try {
    event = await verifier.verify(req.body as Buffer, req.headers);
  } catch (err) {
    if (err instanceof WebhookVerificationError) {
      console.log(`rejected ${String(req.headers['webhook-id'] ?? '(no webhook-id)')}: ${err.code}`);
      res.status(401).json({ error: err.code });
      return;
    }
    throw err; // the signing key could not be fetched: a 5xx, and Kassa retries
  }
  // Acknowledge first, work afterwards; de-duplicate on webhook-id (delivery is at least once).
  res.status(204).end();
  console.log(`verified ${event.type}${describe(event)} (${String(req.headers['webhook-id'])})`);
});

/** One line of what the event says: the order or subscription, and what changed about it. */
function describe(event: WebhookEvent): string {
  switch (event.type) {
    case 'order.refunded':
    case 'order.refund_failed': {
      const { order, refund } = event.data;
      // refund.amountCents: this refund; order.amountRefundedCents: the order's refunded total after it.
      return ` ${order.orderId} ${order.status} refund ${refund.refundId} ${refund.amountCents} ${refund.status}, refunded ${order.amountRefundedCents}/${order.amountCents} ${order.currency}`;
    }
    case 'order.dispute_created':
    case 'order.dispute_closed': {
      const { order, dispute } = event.data;
      // Answer an open dispute in the Stripe Dashboard before evidenceDueBy.
      return ` ${order.orderId} dispute ${dispute.disputeId} ${dispute.reason} ${dispute.status}${dispute.outcome ? ` (${dispute.outcome})` : ` evidence due ${dispute.evidenceDueBy ?? 'n/a'}`}`;
    }
    case 'subscription.action_required': {
      const { subscription } = event.data;
      // Send the buyer to Stripe's page for the renewal that needs them (3-D Secure).
      return ` ${subscription.subscriptionId} needs the buyer: ${subscription.paymentAction?.hostedInvoiceUrl ?? '(already paid)'}`;
    }
    default:
      if ('order' in event.data) return ` ${event.data.order.orderId} ${event.data.order.status}`;
      if ('subscription' in event.data) return ` ${event.data.subscription.subscriptionId} ${event.data.subscription.status}`;
      return '';
  }
}

app.listen(port, () => console.log(`webhook receiver listening on http://localhost:${port}/webhooks/kassa`));
