/**
 * What the order page says about a card payment, true for the rail and the order's state: the
 * sandbox is not Stripe (no money moves, nothing to find in a Dashboard), and a refunded order's
 * processor status (`succeeded`, as Stripe keeps it) and funds date are read with the refund.
 * Pure: tested by test/console/payment-facts.test.ts.
 */
export interface CardPaymentOrder {
  providerPaymentId?: string | null | undefined;
  providerStatus?: string | null | undefined;
  settledAvailableOn?: string | null | undefined;
  fundsSettled?: boolean | undefined;
  amountCents: number;
  amountRefundedCents: number;
  refunded: boolean;
  disputed: boolean;
  status: string;
}

export interface CardPaymentFacts {
  sandbox: boolean;
  rail: string;
  /** The processor's status in words, with what happened after it (refund, dispute). */
  processorStatus: string;
  /** undefined: show the date of `settledAvailableOn`; a string: show the words instead. */
  fundsNote: string | undefined;
  /** The payment id links to Stripe's Dashboard (never for the sandbox's `sbx_pay_…`). */
  linkToStripe: boolean;
}

/** A payment of the sandbox card processor (development): its ids start `sbx_`. */
export const isSandboxPayment = (id: string | null | undefined): boolean => Boolean(id?.startsWith('sbx_'));

export function cardPaymentFacts(order: CardPaymentOrder): CardPaymentFacts {
  // Nothing was charged (a total of 0: an immediate downgrade's order, a renewal the credit balance or a coupon paid whole): no rail to name.
  if (!order.providerPaymentId && order.amountCents === 0) {
    return { sandbox: false, rail: 'None: nothing to charge (total 0)', processorStatus: '—', fundsNote: 'None: nothing was charged', linkToStripe: false };
  }
  const sandbox = isSandboxPayment(order.providerPaymentId);
  const after: string[] = [];
  if (order.refunded || (order.amountRefundedCents > 0 && order.amountRefundedCents >= order.amountCents)) after.push('refunded in full');
  else if (order.amountRefundedCents > 0) after.push('partly refunded');
  if (order.disputed) after.push('disputed');
  const status = order.providerStatus ?? undefined;
  const processorStatus = status === undefined ? '—' : after.length > 0 && status === 'succeeded' ? `Payment succeeded, then ${after.join(' and ')}` : status;
  let fundsNote: string | undefined;
  if (sandbox) fundsNote = 'None: sandbox payments move no money';
  else if (after.includes('refunded in full')) fundsNote = 'None: the payment was refunded in full';
  else if (!order.settledAvailableOn) fundsNote = '—';
  return {
    sandbox,
    rail: sandbox ? 'Card (sandbox: test payments, no money moves)' : 'Card (Stripe)',
    processorStatus,
    fundsNote,
    linkToStripe: !sandbox,
  };
}
