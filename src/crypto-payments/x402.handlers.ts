/** The x402 facilitator on the merchant API (bodies are x402's own objects) and its relayer on the admin API. */
import type { AdminHandlers, MerchantHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { X402FacilitatorService } from './x402-facilitator.service.js';
import type { X402PaywallService } from './x402-paywall.service.js';

type X402MerchantHandlers = Pick<MerchantHandlers, 'getX402Supported' | 'verifyX402Payment' | 'settleX402Payment' | 'getX402Settlement' | 'putX402Paywall' | 'deleteX402Paywall'>;
type X402AdminHandlers = Pick<AdminHandlers, 'getX402Relayer' | 'createX402Relayer'>;

export function createX402MerchantHandlers(facilitator: X402FacilitatorService, paywalls: X402PaywallService): X402MerchantHandlers {
  return {
    putX402Paywall: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'x402 paywall saved', data: await paywalls.enable(auth.orgId, params.id, body.contentUrl) },
    }),
    deleteX402Paywall: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'x402 paywall removed', data: await paywalls.disable(auth.orgId, params.id) },
    }),
    getX402Supported: async ({ auth }) => ({ status: 200, body: await facilitator.supported(auth.orgId) }),
    verifyX402Payment: async ({ auth, body }) => ({ status: 200, body: await facilitator.verify(auth.orgId, body) }),
    settleX402Payment: async ({ auth, body }) => ({ status: 200, body: await facilitator.settle(auth.orgId, body) }),
    getX402Settlement: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: await facilitator.settlement(auth.orgId, query) },
    }),
  };
}

export function createX402AdminHandlers(facilitator: X402FacilitatorService): X402AdminHandlers {
  const present = (r: { address: string; createdAt: Date }) => ({ address: r.address, createdAt: iso(r.createdAt) });
  return {
    getX402Relayer: async () => ({ status: 200, body: { success: true, message: 'OK', data: present(await facilitator.relayer()) } }),
    createX402Relayer: async () => ({ status: 201, body: { success: true, message: 'x402 relayer created', data: present(await facilitator.createRelayer()) } }),
  };
}
