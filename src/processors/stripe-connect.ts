/**
 * Stripe Connect with destination charges (docs/card-processors.md): the platform's Stripe account
 * owns every Checkout Session, its events and its refunds; a payment of an organization bound to a
 * connected account is transferred to that account (`transfer_data.destination`), and a refund of
 * it reverses the transfer (`reverse_transfer`).
 */
import Stripe from 'stripe';
import type { CheckoutSession } from '../commerce/model.js';
import { serviceUnavailable, validationError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { INTERACTIVE, withStripeRetries } from './stripe-retry.js';

/**
 * The transfer of a session's payment to its connected account, to spread into the Checkout
 * Session's `payment_intent_data` (one-time) or `subscription_data` (subscriptions, whose
 * invoices are then transferred too); empty when the session pays the platform's own account.
 */
export function destinationTransfer(session: Pick<CheckoutSession, 'processorAccountId'>): { transfer_data?: { destination: string } } {
  return session.processorAccountId ? { transfer_data: { destination: session.processorAccountId } } : {};
}

/** Is this Stripe refusal about the destination account (not connected, restricted, capability missing)? */
export function isDestinationRefusal(err: unknown): boolean {
  return err instanceof Stripe.errors.StripeInvalidRequestError && /transfer_data|destination/.test(`${err.param ?? ''} ${err.message}`);
}

/** What Stripe says of a connected account now (Connect `account.updated`, read back). */
export interface ConnectedAccountState {
  accountId: string;
  chargesEnabled: boolean;
  /** The `transfers` and `card_payments` capabilities' statuses (`active`, `inactive`, `pending`); null when the account has none. */
  transfers: string | null;
  cardPayments: string | null;
}

/** Checks a connected account with Stripe before an organization is bound to it (OrgService's ConnectedAccountCheck). */
export class StripeConnectedAccounts {
  constructor(
    private readonly stripe: Stripe,
    private readonly logger: Logger,
  ) {}

  /**
   * The account as Stripe has it now (for `account.updated`: never the event's copy); undefined
   * when it is not (or no longer) connected to this platform. 503 when Stripe cannot be reached.
   */
  async read(accountId: string): Promise<ConnectedAccountState | undefined> {
    let account: Stripe.Account;
    try {
      account = await withStripeRetries(() => this.stripe.accounts.retrieve(accountId), INTERACTIVE);
    } catch (err) {
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripePermissionError) return undefined;
      const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, statusCode: err.statusCode, requestId: err.requestId } : undefined;
      this.logger.warn({ err: stripe ? undefined : err, stripe }, 'Stripe: could not read a connected account back');
      throw serviceUnavailable('Stripe could not be reached to read the connected account back; redeliver the event');
    }
    return {
      accountId: account.id,
      chargesEnabled: account.charges_enabled ?? false,
      transfers: account.capabilities?.transfers ?? null,
      cardPayments: account.capabilities?.card_payments ?? null,
    };
  }

  async verify(accountId: string): Promise<void> {
    let account: Stripe.Account;
    try {
      account = await withStripeRetries(() => this.stripe.accounts.retrieve(accountId), INTERACTIVE);
    } catch (err) {
      // Unknown, or not connected to this platform (Stripe answers 404 or 403 for another platform's account).
      if (err instanceof Stripe.errors.StripeInvalidRequestError || err instanceof Stripe.errors.StripePermissionError) {
        throw validationError(`body.accountId ${accountId} is not a Stripe account connected to this platform's Stripe account`);
      }
      const stripe = err instanceof Stripe.errors.StripeError ? { type: err.type, statusCode: err.statusCode, requestId: err.requestId } : undefined;
      this.logger.warn({ err: stripe ? undefined : err, stripe }, 'Stripe: could not read a connected account');
      throw serviceUnavailable('Stripe could not be reached to check the connected account; nothing was changed, retry');
    }
    const transfers = account.capabilities?.transfers ?? 'inactive';
    if (transfers !== 'active') {
      throw validationError(`The Stripe account ${accountId} cannot receive transfers yet (its transfers capability is ${transfers}); finish its onboarding in Stripe first`);
    }
  }
}
