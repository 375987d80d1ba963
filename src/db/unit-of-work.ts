import type { Knex } from 'knex';
import type { UnitOfWork } from '../kernel/unit-of-work.js';

/** A knex unit of work: `storesOn` binds a domain's repositories to the database or a transaction. */
export class KnexUnitOfWork<Stores> implements UnitOfWork<Stores> {
  readonly stores: Stores;
  constructor(
    private readonly db: Knex,
    private readonly storesOn: (executor: Knex, transaction: Knex.Transaction | undefined) => Stores,
  ) {
    this.stores = storesOn(db, undefined);
  }
  transaction<T>(work: (stores: Stores) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => work(this.storesOn(trx, trx)));
  }
}
