import type { RefundStatus } from '../commerce/model.js';

/** A Stripe Refund's status in Kassa's words: `requires_action` (the buyer must act, e.g. a bank transfer refund) is still pending. */
export function refundStatus(status: string | null): RefundStatus {
  return status === 'succeeded' || status === 'failed' || status === 'canceled' ? status : 'pending';
}
