/**
 * The "renewal needs your confirmation" e-mail's words (issue 28 §4, 3-D Secure on a renewal):
 * Stripe's hosted invoice page as the button while the subscription waits on it, no button once it
 * was settled before the e-mail went out, and never a link that is not http(s). The e-mail sent
 * over SMTP is in test/e2e/after-payment-scenario.browser.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { renderBuyerEmail } from '../../src/buyer-emails/buyer-email.render.js';
import type { Subscription } from '../../src/commerce/model.js';

const at = new Date('2026-11-01T00:00:00Z');
const subscription: Subscription = {
  id: 'SUB_1',
  orgId: 'ORG_1',
  status: 'ACTIVE',
  provider: 'STRIPE',
  customerId: 'CUS_1',
  customerEmail: 'ada@example.com',
  productId: 'PRD_1',
  productName: 'Pro plan',
  quantity: 1,
  priceId: 'PRC_1',
  amountCents: 900,
  currency: 'EUR',
  billingInterval: 'MONTH',
  billingIntervalCount: 1,
  currentPeriodStart: at,
  currentPeriodEnd: new Date('2026-12-01T00:00:00Z'),
  periodNumber: 1,
  billingAnchor: at,
  anchorPeriod: 0,
  cancelAtPeriodEnd: false,
  canceledAt: null,
  endedAt: null,
  pausedAt: null,
  nextActionAt: at,
  failedAttempts: 0,
  initialOrderId: 'ORD_1',
  latestOrderId: 'ORD_1',
  checkoutSessionId: 'CS_1',
  paymentMethod: 'card_4242',
  manageToken: 'm',
  processorSubscriptionId: 'sub_1',
  paymentAction: { invoiceId: 'in_1', url: 'https://invoice.stripe.com/i/acct_1/test_x', requiredAt: at },
  createdAt: at,
  updatedAt: at,
};
const render = (s: Subscription) => renderBuyerEmail({ kind: 'renewal_action_required', merchant: 'Org A', subscription: s, portalUrl: 'https://pay.example.com/portal/o/ORG_1' });

describe('renewal needs your confirmation', () => {
  it("links Stripe's hosted invoice page as 'Confirm your payment' (HTML and text) beside the portal", () => {
    const mail = render(subscription);
    expect(mail.subject).toBe('Pro plan: confirm your payment to keep your subscription');
    expect(mail.text).toContain('Your bank asks you to confirm the renewal payment of €9.00 for your Pro plan subscription with Org A.');
    expect(mail.text).toContain('Confirm your payment: https://invoice.stripe.com/i/acct_1/test_x');
    expect(mail.text).toContain('https://pay.example.com/portal/o/ORG_1');
    expect(mail.html).toMatch(/<a href="https:\/\/invoice\.stripe\.com\/i\/acct_1\/test_x"[^>]*>Confirm your payment<\/a>/);
  });

  it('settled before it was sent: no button, nothing to do; a non-http link from the processor is never written', () => {
    for (const s of [{ ...subscription, paymentAction: null }, { ...subscription, paymentAction: { ...subscription.paymentAction!, url: 'javascript:alert(1)' } }]) {
      const mail = render(s);
      expect(mail.html).not.toContain('Confirm your payment');
      expect(mail.html).not.toContain('javascript:');
      expect(mail.text).toContain('It no longer needs you');
    }
  });
});
