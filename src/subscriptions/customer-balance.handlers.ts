/** The merchant API's customer credit balance operations (customer-balance.service.ts). */
import type { MerchantHandlers } from '../handler-maps.js';
import { presentBalanceEntry, type CustomerBalanceService } from './customer-balance.service.js';

type BalanceHandlers = Pick<MerchantHandlers, 'getCustomerBalance' | 'listCustomerBalanceTransactions' | 'createCustomerBalanceTransaction'>;

export function createCustomerBalanceHandlers(balances: CustomerBalanceService): BalanceHandlers {
  return {
    getCustomerBalance: async ({ auth, params }) => {
      const rows = await balances.balances(auth.orgId, params.id);
      return {
        status: 200,
        body: { success: true, message: 'OK', data: { customerId: params.id, balances: rows.map((b) => ({ currency: b.currency, amountCents: b.amountCents, updatedAt: b.updatedAt.toISOString() })) } },
      };
    },
    listCustomerBalanceTransactions: async ({ auth, params, query }) => {
      const limit = query.limit ?? 20;
      const page = await balances.transactions(auth.orgId, params.id, { currency: query.currency, limit, startingAfter: query.starting_after });
      const items = page.items.map(presentBalanceEntry);
      return { status: 200, body: { success: true, message: 'OK', data: { items, hasMore: page.hasMore, nextCursor: page.hasMore ? items[items.length - 1]!.transactionId : null } } };
    },
    createCustomerBalanceTransaction: async ({ auth, params, headers, body }) => {
      const { entry, replayed } = await balances.adjust(auth.orgId, params.id, headers['Idempotency-Key'], body);
      return {
        status: 201,
        headers: replayed ? { 'Idempotent-Replayed': 'true' } : undefined,
        body: { success: true, message: replayed ? 'Customer balance already adjusted with this Idempotency-Key' : 'Customer balance adjusted', data: presentBalanceEntry(entry) },
      };
    },
  };
}
