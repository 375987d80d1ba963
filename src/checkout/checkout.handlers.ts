import type { MerchantHandlers } from '../handler-maps.js';
import type { CheckoutSessionService } from './checkout-session.service.js';
import type { CheckoutSession } from '../commerce/model.js';
import { presentCheckoutSession } from './checkout-session.presenter.js';

type CheckoutHandlers = Pick<MerchantHandlers, 'createCheckoutSession' | 'getCheckoutSession' | 'expireCheckoutSession'>;

export function createCheckoutHandlers(sessions: CheckoutSessionService, publicBaseUrl: string): CheckoutHandlers {
  /** `fresh`: just created, so no payment (and no order) can exist yet: one query less. */
  const present = async (session: CheckoutSession, fresh = false) =>
    presentCheckoutSession(session, fresh ? undefined : await sessions.orderOf(session), {
      publicBaseUrl,
      payable: sessions.isPayable(session),
      crypto: await sessions.cryptoQuoteOf(session),
    });
  return {
    createCheckoutSession: async ({ auth, headers, body }) => {
      const { session, replayed } = await sessions.create(auth.orgId, headers['Idempotency-Key'], body, auth.organization);
      return {
        status: 201,
        headers: replayed ? { 'Idempotent-Replayed': 'true' } : undefined,
        body: { success: true, message: replayed ? 'Checkout session already created with this Idempotency-Key' : 'Checkout session created', data: await present(session, !replayed) },
      };
    },
    getCheckoutSession: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: await present(await sessions.get(auth.orgId, params.id)) },
    }),
    expireCheckoutSession: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Checkout session expired', data: await present(await sessions.expire(auth.orgId, params.id)) },
    }),
  };
}
