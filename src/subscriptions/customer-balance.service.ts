/**
 * The customer credit balance as the merchant sees and adjusts it (issue 39; merchant API
 * getCustomerBalance, listCustomerBalanceTransactions, createCustomerBalanceTransaction). The
 * balance itself is moved by plan changes and renewals (subscription.service.ts); here only reads
 * and the merchant's adjustments, each under the balance row's lock.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { AppError, conflict, notFound, validationError } from '../kernel/errors.js';
import type { CommerceStores, CommerceUnitOfWork, CustomerBalanceEntry } from '../commerce/stores.js';

export interface BalanceAdjustment {
  currency: string;
  amountCents: number;
  description: string;
  expectedBalanceCents?: number;
}

export class CustomerBalanceService {
  constructor(
    private readonly uow: CommerceUnitOfWork,
    private readonly clock: Clock,
  ) {}

  private async customerOf(stores: Pick<CommerceStores, 'customers'>, orgId: string, customerId: string) {
    const customer = await stores.customers.find(orgId, customerId);
    if (!customer) throw notFound('Customer');
    return customer;
  }

  async balances(orgId: string, customerId: string) {
    await this.customerOf(this.uow.stores, orgId, customerId);
    return this.uow.stores.balances.balancesOf(orgId, customerId);
  }

  async transactions(orgId: string, customerId: string, page: { currency?: string; limit: number; startingAfter?: string }) {
    await this.customerOf(this.uow.stores, orgId, customerId);
    const result = await this.uow.stores.balances.entries(orgId, customerId, page);
    if (!result) throw validationError('starting_after is not a transaction of this customer', { field: 'starting_after' });
    return result;
  }

  /**
   * A merchant's credit (> 0) or debit (< 0), once per Idempotency-Key: the key is looked up after
   * the balance row's lock, so a repeated request waits for the first and replays its entry.
   */
  async adjust(orgId: string, customerId: string, idempotencyKey: string, input: BalanceAdjustment): Promise<{ entry: CustomerBalanceEntry; replayed: boolean }> {
    const currency = input.currency.toUpperCase();
    const description = input.description.trim();
    if (input.amountCents === 0) throw validationError('amountCents must not be 0: positive credits the customer, negative debits the balance', { field: 'amountCents' });
    const requestHash = createHash('sha256').update(JSON.stringify([customerId, currency, input.amountCents, description, input.expectedBalanceCents ?? null])).digest('hex');
    const reused = () => new AppError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used for another balance adjustment; use a new key for a new adjustment');
    return this.uow.transaction(async (stores) => {
      await this.customerOf(stores, orgId, customerId);
      const now = this.clock.now();
      const key = { orgId, customerId, currency };
      const before = await stores.balances.lockForChange(key, now);
      const earlier = await stores.balances.findByIdempotencyKey(orgId, idempotencyKey);
      if (earlier) {
        if (earlier.requestHash !== requestHash) throw reused();
        return { entry: earlier, replayed: true };
      }
      if (input.expectedBalanceCents !== undefined && input.expectedBalanceCents !== before) {
        throw conflict(`The customer's ${currency} balance is ${before}, not the expectedBalanceCents ${input.expectedBalanceCents}; nothing was adjusted`);
      }
      if (before + input.amountCents < 0) {
        throw conflict(`A debit takes at most the balance: the customer's ${currency} balance is ${before}; nothing was adjusted`);
      }
      const entry = await stores.balances.recordAdjustment({ ...key, amount: input.amountCents, balanceBefore: before, description, idempotencyKey, requestHash, at: now });
      // Another customer's or currency's adjustment took the key meanwhile (the same one's would have waited for the lock).
      if (!entry) throw reused();
      return { entry, replayed: false };
    });
  }
}

export function presentBalanceEntry(e: CustomerBalanceEntry) {
  return {
    transactionId: e.id,
    customerId: e.customerId,
    currency: e.currency,
    type: e.kind,
    amountCents: e.amountCents,
    endingBalanceCents: e.endingBalanceCents,
    description: e.description,
    orderId: e.orderId,
    subscriptionId: e.subscriptionId,
    createdAt: e.createdAt.toISOString(),
  };
}
