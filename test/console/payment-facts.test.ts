/** The order page's card payment facts (issue 37, item 21): the sandbox is not Stripe, a refund changes what is true. */
import { describe, expect, it } from 'vitest';
import { cardPaymentFacts } from '../../web/console/routes/orders/lib/payment-facts.js';

const paid = { providerPaymentId: 'pi_3QhTJ2LkdIwHu7ix', providerStatus: 'succeeded', settledAvailableOn: '2026-11-24T00:00:00.000Z', amountCents: 1500, amountRefundedCents: 0, refunded: false, disputed: false, status: 'PAID' };

describe('cardPaymentFacts', () => {
  it('a Stripe payment: Stripe, its status, the funds date', () => {
    expect(cardPaymentFacts(paid)).toEqual({ sandbox: false, rail: 'Card (Stripe)', processorStatus: 'succeeded', fundsNote: undefined, linkToStripe: true });
  });

  it('a sandbox payment is not called Stripe and promises no funds', () => {
    const facts = cardPaymentFacts({ ...paid, providerPaymentId: 'sbx_pay_abc' });
    expect(facts.rail).not.toMatch(/Stripe/);
    expect(facts.rail).toMatch(/sandbox/);
    expect(facts.linkToStripe).toBe(false);
    expect(facts.fundsNote).toMatch(/no money/);
  });

  it('an order of total 0 with no payment (an immediate downgrade, a renewal the credit balance paid) names no card rail', () => {
    const facts = cardPaymentFacts({ ...paid, providerPaymentId: null, amountCents: 0 });
    expect(facts).toEqual({ sandbox: false, rail: 'None: nothing to charge (total 0)', processorStatus: '—', fundsNote: 'None: nothing was charged', linkToStripe: false });
  });

  it('a refunded order says so beside "succeeded", and no funds are available', () => {
    const full = cardPaymentFacts({ ...paid, amountRefundedCents: 1500, refunded: true, status: 'REFUNDED' });
    expect(full.processorStatus).toBe('Payment succeeded, then refunded in full');
    expect(full.fundsNote).toBe('None: the payment was refunded in full');
    const part = cardPaymentFacts({ ...paid, amountRefundedCents: 500 });
    expect(part.processorStatus).toBe('Payment succeeded, then partly refunded');
    expect(part.fundsNote).toBeUndefined();
    expect(cardPaymentFacts({ ...paid, disputed: true }).processorStatus).toBe('Payment succeeded, then disputed');
  });
});
