/**
 * A unit of work: stores bound to the database for reads, or to one transaction whose changes
 * commit or roll back together. Implemented over knex in src/db/unit-of-work.ts.
 */
export interface UnitOfWork<Stores> {
  /** Stores outside any transaction (reads, single-statement writes). */
  readonly stores: Stores;
  transaction<T>(work: (stores: Stores) => Promise<T>): Promise<T>;
}
