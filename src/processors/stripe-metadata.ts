/** What Stripe's objects and events carry of Kassa, shared by the Stripe processor's parts. */

/** Metadata on Stripe's objects naming Kassa's: how an event finds its way back. */
export const KASSA_SESSION_KEY = 'kassa_checkout_session_id';
export const KASSA_ORG_KEY = 'kassa_org_id';

/** What receiving one Stripe event did. */
export type StripeEventOutcome = 'applied' | 'duplicate' | 'ignored';
