/**
 * The x402 reason codes Kassa answers (`invalidReason` of verify, `errorReason` of settle, the
 * `error` of a paywall's PAYMENT-REQUIRED). The `invalid_exact_evm_*` ones are the official
 * @x402/evm facilitator's own; the others are x402's generic ones. A refusal carries one of these
 * codes and, apart from it, a human message (`invalidMessage` / `errorMessage`).
 */
export const X402_REASONS = {
  scheme: 'invalid_exact_evm_scheme',
  networkMismatch: 'invalid_exact_evm_network_mismatch',
  network: 'invalid_network',
  requirements: 'invalid_payment_requirements',
  /** The PAYMENT-SIGNATURE header or the payload is not an x402 v2 `exact` EIP-3009 payload. */
  payload: 'invalid_payload',
  unsupportedPayload: 'unsupported_payload_type',
  missingDomain: 'invalid_exact_evm_missing_eip712_domain',
  recipient: 'invalid_exact_evm_recipient_mismatch',
  authorization: 'invalid_exact_evm_authorization_value',
  valueMismatch: 'invalid_exact_evm_payload_authorization_value_mismatch',
  parseSignature: 'invalid_exact_evm_failed_to_parse_signature',
  signature: 'invalid_exact_evm_signature',
  /** An ERC-6492 (counterfactual smart wallet) signature: Kassa allows no deployment factory, as the official facilitator by default. */
  factoryNotAllowed: 'eip6492_factory_not_allowed',
  validBefore: 'invalid_exact_evm_payload_authorization_valid_before',
  validAfter: 'invalid_exact_evm_payload_authorization_valid_after',
  nonceUsed: 'invalid_exact_evm_nonce_already_used',
  balance: 'invalid_exact_evm_insufficient_balance',
  simulation: 'invalid_exact_evm_transaction_simulation_failed',
  transactionFailed: 'invalid_exact_evm_transaction_failed',
  transferEventMismatch: 'invalid_exact_evm_transfer_event_mismatch',
  pending: 'settlement_pending',
  unexpected: 'unexpected_settle_error',
} as const;

export type X402Reason = (typeof X402_REASONS)[keyof typeof X402_REASONS];

/** A payment refused: an x402 reason code, a human message, the payer when known. */
export class X402Refusal extends Error {
  constructor(
    readonly reason: X402Reason,
    message: string,
    readonly payer?: string,
  ) {
    super(message);
    this.name = 'X402Refusal';
  }
}
