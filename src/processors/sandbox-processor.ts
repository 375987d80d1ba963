/**
 * The built-in sandbox card processor. No card data is kept beyond the last four digits; the
 * outcome is chosen by the documented test card numbers:
 *
 * | card number          | result |
 * |----------------------|--------|
 * | 4242 4242 4242 4242  | succeeds at once |
 * | 4000 0000 0000 0002  | declined: `card_declined` (the session stays payable) |
 * | 4000 0000 0000 9995  | declined: `insufficient_funds` |
 * | 4000 0000 0000 0077  | accepted as pending, succeeds a few seconds later |
 * | 4000 0000 0000 0085  | accepted as pending, fails a few seconds later |
 * | 4000 0000 0000 0341  | succeeds now; declines on renewal (subscriptions) |
 *
 * Any other number that passes the Luhn check succeeds; one that fails it is `incorrect_number`.
 * An expiry in the past is `expired_card`.
 */
import type { Clock } from '../kernel/clock.js';
import { randomToken } from '../kernel/ids.js';
import type { CardProcessor, ChargeRequest, ChargeResult, SavedMethodChargeRequest, SavedMethodChargeResult } from './card-processor.js';
import type { SandboxPaymentRepository } from './sandbox.repository.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';

type Behaviour =
  | { kind: 'succeed'; declinesOnRenewal?: true }
  | { kind: 'decline'; code: string; message: string }
  | { kind: 'async'; outcome: 'succeeded' | 'failed' };

export const SANDBOX_CARDS: Record<string, Behaviour> = {
  '4242424242424242': { kind: 'succeed' },
  '4000000000000002': { kind: 'decline', code: 'card_declined', message: 'Your card was declined.' },
  '4000000000009995': { kind: 'decline', code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
  '4000000000000077': { kind: 'async', outcome: 'succeeded' },
  '4000000000000085': { kind: 'async', outcome: 'failed' },
  '4000000000000341': { kind: 'succeed', declinesOnRenewal: true },
};

export function luhnValid(digits: string): boolean {
  if (!/^\d{12,19}$/.test(digits)) return false;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

export class SandboxCardProcessor implements CardProcessor {
  constructor(
    private readonly payments: SandboxPaymentRepository,
    private readonly clock: Clock,
    /** How long an asynchronous test card stays pending. */
    private readonly settleDelayMs: number,
  ) {}

  async charge(request: ChargeRequest): Promise<ChargeResult> {
    const now = this.clock.now();
    const number = request.card.number.replace(/[\s-]/g, '');
    const decline = (code: string, message: string): ChargeResult => ({ status: 'declined', code, message, requestId: `sbx_req_${randomToken()}` });
    if (!luhnValid(number)) return decline('incorrect_number', 'Your card number is incorrect.');
    const { expMonth, expYear } = request.card;
    const endOfExpiryMonth = Date.UTC(expYear, expMonth, 1); // first instant after the expiry month
    if (expMonth < 1 || expMonth > 12 || endOfExpiryMonth <= now.getTime()) return decline('expired_card', 'Your card has expired.');
    if (!/^\d{3,4}$/.test(request.card.cvc)) return decline('incorrect_cvc', "Your card's security code is incorrect.");

    const behaviour = SANDBOX_CARDS[number] ?? { kind: 'succeed' };
    if (behaviour.kind === 'decline') return decline(behaviour.code, behaviour.message);
    const paymentId = `sbx_pay_${randomToken()}`;
    const accepted = await this.payments.insertAccepted({
      id: paymentId,
      orgId: request.orgId,
      checkoutSessionId: request.checkoutSessionId,
      outcome: behaviour.kind === 'async' ? behaviour.outcome : 'succeeded',
      cardLast4: number.slice(-4),
      state: behaviour.kind === 'async' ? 'pending' : 'succeeded',
      settleAt: behaviour.kind === 'async' ? new Date(now.getTime() + this.settleDelayMs) : null,
      createdAt: now,
    });
    if (!accepted) return { status: 'already_accepted' };
    // The saved method remembers only what renewals need: last four digits and the renewal behaviour.
    const paymentMethod = `sbx_pm_${behaviour.kind === 'succeed' && behaviour.declinesOnRenewal ? 'renewal_decline' : 'ok'}_${number.slice(-4)}`;
    return behaviour.kind === 'async' ? { status: 'pending', paymentId, paymentMethod } : { status: 'succeeded', paymentId, paymentMethod };
  }

  /** Renewals: succeed, except for the test card documented to decline on renewal. */
  async chargeSavedMethod(request: SavedMethodChargeRequest): Promise<SavedMethodChargeResult> {
    if (request.paymentMethod.startsWith('sbx_pm_renewal_decline_')) {
      return { status: 'declined', code: 'card_declined', message: 'Your card was declined.', requestId: `sbx_req_${randomToken()}` };
    }
    return { status: 'succeeded', paymentId: `sbx_pay_${randomToken()}` };
  }

  /**
   * Worker pass: reports due asynchronous payments through the same idempotent path a real
   * processor's webhook would use. Applying first and marking after makes a crash in between
   * harmless (the result is applied again, which changes nothing).
   */
  async settleDue(payments: PaymentFlow, limit = 50): Promise<number> {
    const due = await this.payments.listDue(this.clock.now(), limit);
    for (const payment of due) {
      await payments.applyPaymentResult({ checkoutSessionId: payment.checkoutSessionId, outcome: payment.outcome, processorPaymentId: payment.id });
      await this.payments.markSettled(payment.id, payment.outcome);
    }
    return due.length;
  }
}
