/**
 * Calls with the same key made in one turn of the event loop, answered by one call made right
 * after that turn (setImmediate) with every caller's argument. The shared call starts after the
 * last caller of its turn asked, so each caller sees at least everything committed before it
 * asked, as its own call would: nothing read before a caller arrived is handed to it. A caller
 * arriving in a later turn starts a new batch.
 *
 * A dashboard's metric queries, made together, read the same rows: the metrics service reads
 * them once (docs/benchmarks.md, the telemetry explorer's 30-day dashboard).
 */
export function batchPerTurn<A, R>(run: (key: string, args: A[]) => Promise<R>): (key: string, arg: A) => Promise<R> {
  const open = new Map<string, { args: A[]; result: Promise<R> }>();
  return (key, arg) => {
    let batch = open.get(key);
    if (!batch) {
      const args: A[] = [];
      const result = new Promise<R>((resolve, reject) => {
        setImmediate(() => {
          open.delete(key);
          try {
            run(key, args).then(resolve, reject);
          } catch (err) {
            reject(err);
          }
        });
      });
      open.set(key, (batch = { args, result }));
    }
    batch.args.push(arg);
    return batch.result;
  };
}
