/**
 * Reads that may be answered a little late (lists, metrics, the explorer): the database layer runs
 * them on a read replica when one has caught up far enough for the caller (src/db/replicas.ts),
 * otherwise on the primary. Services ask for it only where a slightly stale answer is acceptable;
 * money paths, idempotency and every read inside a transaction use the primary's repositories.
 */
export interface LagTolerantReads<R> {
  /** Runs `work` on a repository bound to a replica fresh enough for `caller` (an organization), or to the primary. */
  read<T>(caller: string, work: (on: R) => Promise<T>): Promise<T>;
}

/** Every read on the one repository given (the embedded database, no replica configured, tests). */
export function primaryReads<R>(on: R): LagTolerantReads<R> {
  return { read: (_caller, work) => work(on) };
}
