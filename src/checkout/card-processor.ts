/**
 * The card rail behind the hosted checkout page. A real processor plugs in here; the built-in
 * implementation is the sandbox processor (sandbox-processor.ts), whose test cards are documented
 * in openapi/merchant.yaml (createCheckoutSession).
 */
export interface CardDetails {
  number: string;
  expMonth: number;
  expYear: number;
  cvc: string;
}

export interface ChargeRequest {
  orgId: string;
  checkoutSessionId: string;
  amount: number;
  currency: string;
  card: CardDetails;
}

export type ChargeResult =
  | { status: 'succeeded'; paymentId: string }
  /** Accepted; the result arrives later through OrderService.applyPaymentResult. */
  | { status: 'pending'; paymentId: string }
  | { status: 'declined'; code: string; message: string; requestId: string }
  /** The session already has an accepted payment (a second click, a second tab). */
  | { status: 'already_accepted' };

export interface CardProcessor {
  charge(request: ChargeRequest): Promise<ChargeResult>;
}
