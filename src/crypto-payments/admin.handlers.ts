import type { AdminHandlers } from '../handler-maps.js';
import { iso, page } from '../kernel/present.js';
import type { CryptoTransfer, ReceivingWallet } from './crypto.repository.js';
import { caip2, type CryptoQuoteService } from './crypto-quote.service.js';

type CryptoAdminHandlers = Pick<AdminHandlers, 'listReceivingWallets' | 'setReceivingWallet' | 'deleteReceivingWallet' | 'listCryptoTransfers'>;

/** A receiving wallet as the admin and console answers show it. */
export const presentWallet = (crypto: CryptoQuoteService, w: ReceivingWallet) => ({
  orgId: w.orgId,
  chainId: w.chainId,
  chain: caip2(w.chainId),
  chainName: crypto.chain(w.chainId)?.name ?? null,
  address: w.address,
  createdAt: iso(w.createdAt),
  updatedAt: iso(w.updatedAt),
});

export function createCryptoAdminHandlers(crypto: CryptoQuoteService): CryptoAdminHandlers {
  const presentOne = (w: ReceivingWallet) => presentWallet(crypto, w);
  const presentTransfer = (t: CryptoTransfer) => ({
    id: t.id,
    chainId: t.chainId,
    txHash: t.txHash,
    logIndex: t.logIndex,
    blockNumber: t.blockNumber,
    tokenSymbol: t.tokenSymbol,
    tokenAddress: t.tokenAddress,
    fromAddress: t.fromAddress,
    toAddress: t.toAddress,
    valueUnits: t.value.toString(),
    status: t.status,
    confirmations: t.confirmations,
    checkoutSessionId: t.checkoutSessionId,
    orgId: t.orgId,
    orderId: t.orderId,
    note: t.note,
    seenAt: iso(t.seenAt),
    updatedAt: iso(t.updatedAt),
  });
  return {
    listReceivingWallets: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await crypto.listWallets(params.id)).map(presentOne) },
    }),
    setReceivingWallet: async ({ params, body }) => ({
      status: 200,
      body: { success: true, message: 'Receiving wallet set', data: presentOne(await crypto.setWallet(params.id, Number(params.chainId), body.address)) },
    }),
    deleteReceivingWallet: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Receiving wallet removed', data: presentOne(await crypto.removeWallet(params.id, Number(params.chainId))) },
    }),
    listCryptoTransfers: async ({ query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await crypto.listTransfers({ orgId: query.orgId, chainId: query.chainId === undefined ? undefined : Number(query.chainId), status: query.status }, pageNumber, size);
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentTransfer), total, pageNumber, size) } };
    },
  };
}
