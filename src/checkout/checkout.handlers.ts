import type { MerchantHandlers } from '../handler-maps.js';
import type { CheckoutSessionService } from './checkout-session.service.js';
import type { CheckoutSession } from '../commerce/model.js';
import type { SessionOrder } from '../commerce/stores.js';
import { presentCheckoutSession } from './checkout-session.presenter.js';

type CheckoutHandlers = Pick<MerchantHandlers, 'createCheckoutSession' | 'getCheckoutSession' | 'expireCheckoutSession'>;

export function createCheckoutHandlers(sessions: CheckoutSessionService, publicBaseUrl: string): CheckoutHandlers {
  /**
   * `order`: undefined to look it up; null when there is none (just created, so no payment can
   * exist yet), or as read with the session (GET): one query less either way.
   */
  const present = async (session: CheckoutSession, order?: SessionOrder | null) =>
    presentCheckoutSession(session, order === undefined ? await sessions.orderOf(session) : (order ?? undefined), {
      publicBaseUrl,
      payable: sessions.isPayable(session),
      // Only a crypto session has a quote: the others skip the await.
      crypto: session.provider === 'CRYPTO' ? await sessions.cryptoQuoteOf(session) : undefined,
    });
  return {
    createCheckoutSession: async ({ auth, headers, body }) => {
      const { session, replayed } = await sessions.create(auth.orgId, headers['Idempotency-Key'], body, auth.organization);
      return {
        status: 201,
        headers: replayed ? { 'Idempotent-Replayed': 'true' } : undefined,
        body: { success: true, message: replayed ? 'Checkout session already created with this Idempotency-Key' : 'Checkout session created', data: await present(session, replayed ? undefined : null) },
      };
    },
    getCheckoutSession: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: await sessions.getWithOrder(auth.orgId, params.id).then(({ session, order }) => present(session, order)) },
    }),
    expireCheckoutSession: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Checkout session expired', data: await present(await sessions.expire(auth.orgId, params.id)) },
    }),
  };
}
