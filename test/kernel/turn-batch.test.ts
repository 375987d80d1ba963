/** batchPerTurn (src/kernel/turn-batch.ts): calls of one event-loop turn share one call made after it. */
import { describe, expect, it } from 'vitest';
import { batchPerTurn } from '../../src/kernel/turn-batch.js';

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('batchPerTurn', () => {
  it('one call per key for the callers of a turn, with all their arguments, made after the last of them asked', async () => {
    const runs: Array<{ key: string; args: number[] }> = [];
    const batched = batchPerTurn(async (key: string, args: number[]) => {
      runs.push({ key, args: [...args] });
      return `${key}:${args.join(',')}`;
    });
    const first = [batched('a', 1), batched('b', 2), batched('a', 3)];
    // Still in the same turn (after microtasks): joins, because the call has not been made yet.
    await Promise.resolve();
    first.push(batched('a', 4));
    expect(runs).toEqual([]);
    expect(await Promise.all(first)).toEqual(['a:1,3,4', 'b:2', 'a:1,3,4', 'a:1,3,4']);
    expect(runs).toEqual([
      { key: 'a', args: [1, 3, 4] },
      { key: 'b', args: [2] },
    ]);
    // A later turn starts a new call, even while an earlier one of the same key is running.
    const release: Array<() => void> = [];
    const slow = batchPerTurn((_key: string, args: number[]) => new Promise<number[]>((resolve) => release.push(() => resolve(args))));
    const early = slow('k', 1);
    await turn();
    const late = slow('k', 2);
    await turn();
    expect(release).toHaveLength(2);
    release[1]!();
    expect(await late).toEqual([2]);
    release[0]!();
    expect(await early).toEqual([1]);
  });

  it('a failure, thrown or rejected, reaches every caller of the batch and not the next one', async () => {
    let calls = 0;
    const batched = batchPerTurn((key: string) => {
      calls++;
      if (key === 'throw') throw new Error('thrown');
      return key === 'reject' ? Promise.reject(new Error('rejected')) : Promise.resolve(calls);
    });
    await expect(Promise.all([batched('throw', 0), batched('throw', 1)])).rejects.toThrow('thrown');
    const both = await Promise.allSettled([batched('reject', 0), batched('reject', 1)]);
    expect(both.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await batched('ok', 0)).toBe(3);
  });
});
