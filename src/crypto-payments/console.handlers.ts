/**
 * The console's receiving wallets (openapi/console.yaml, tag Settings) and the x402 paywalls of a
 * product's prices (tag Catalog). Receiving wallets: the admin API's
 * CryptoQuoteService methods for the member's organization, with the configured chains for a
 * settings page. Audited at composition.
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { presentWallet } from './admin.handlers.js';
import { caip2, type CryptoQuoteService } from './crypto-quote.service.js';
import type { X402PaywallService } from './x402-paywall.service.js';

export function createCryptoConsoleHandlers(
  crypto: CryptoQuoteService,
  paywalls: Pick<X402PaywallService, 'listForProduct'>,
): Pick<ConsoleHandlers, 'listConsoleReceivingWallets' | 'setConsoleReceivingWallet' | 'deleteConsoleReceivingWallet' | 'listConsoleX402Paywalls'> {
  return {
    listConsoleX402Paywalls: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: await paywalls.listForProduct(auth.orgId, params.id) },
    }),
    listConsoleReceivingWallets: async ({ auth }) => ({
      status: 200,
      body: {
        success: true,
        message: 'OK',
        data: {
          chains: crypto.config.chains.map((c) => ({ chainId: c.chainId, chain: caip2(c.chainId), chainName: c.name })),
          wallets: (await crypto.listWallets(auth.orgId)).map((w) => presentWallet(crypto, w)),
        },
      },
    }),
    setConsoleReceivingWallet: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Receiving wallet set', data: presentWallet(crypto, await crypto.setWallet(auth.orgId, Number(params.chainId), body.address)) },
    }),
    deleteConsoleReceivingWallet: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Receiving wallet removed', data: presentWallet(crypto, await crypto.removeWallet(auth.orgId, Number(params.chainId))) },
    }),
  };
}
