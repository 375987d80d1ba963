/** A periodic background job, run by the worker (src/worker.ts) and declared by its domain. */
export interface Job {
  name: string;
  /** Pause between two runs when the previous run found nothing to do. */
  intervalMs: number;
  /** One pass. Returns true when it did work, so the next pass starts at once. */
  run(): Promise<boolean>;
  /** Work a pass left running in the background, awaited when the worker stops. */
  drain?(): Promise<void>;
}
