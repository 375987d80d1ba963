/**
 * The repositories the checkout and order services use, bound to one executor: the database, or
 * a transaction so a state change, the rows it touches and its webhook event commit together.
 */
import type { Knex } from 'knex';
import { enqueueWebhookEvent, type OutboxEvent } from '../webhooks/outbox.repository.js';
import { KnexCheckoutSessionRepository, type CheckoutSessionRepository } from '../checkout/checkout-session.repository.js';
import { KnexCustomerRepository, type CustomerRepository } from './customer.repository.js';
import { KnexOrderRepository, type OrderRepository } from './order.repository.js';
import { KnexCryptoRepository, type CryptoRepository } from '../crypto-payments/crypto.repository.js';
import { KnexSubscriptionRepository, type SubscriptionRepository } from '../subscriptions/subscription.repository.js';

export interface CommerceStores {
  sessions: CheckoutSessionRepository;
  orders: OrderRepository;
  customers: CustomerRepository;
  subscriptions: SubscriptionRepository;
  /** Crypto quotes and transfers (a crypto session's quote is stored with the session). */
  crypto: CryptoRepository;
  /** Queues a webhook event; only inside `transaction`, so it commits with the change. */
  emit(event: OutboxEvent, now: Date): Promise<string>;
}

export interface CommerceUnitOfWork {
  /** Stores outside any transaction (reads). */
  readonly stores: CommerceStores;
  transaction<T>(work: (stores: CommerceStores) => Promise<T>): Promise<T>;
}

function storesOn(executor: Knex, inTransaction: boolean): CommerceStores {
  return {
    sessions: new KnexCheckoutSessionRepository(executor),
    orders: new KnexOrderRepository(executor),
    customers: new KnexCustomerRepository(executor),
    crypto: new KnexCryptoRepository(executor),
    subscriptions: new KnexSubscriptionRepository(executor),
    emit: (event, now) => {
      if (!inTransaction) throw new Error('webhook events are emitted inside the transaction of their state change');
      return enqueueWebhookEvent(executor as Knex.Transaction, event, now);
    },
  };
}

export class KnexCommerceUnitOfWork implements CommerceUnitOfWork {
  readonly stores: CommerceStores;
  constructor(private readonly db: Knex) {
    this.stores = storesOn(db, false);
  }
  transaction<T>(work: (stores: CommerceStores) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(storesOn(trx, true)));
  }
}
