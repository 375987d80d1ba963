import { describe, expect, it } from 'vitest';
import { newId, randomToken } from '../../src/kernel/ids.js';

describe('random ids', () => {
  it('are base62 of the asked length, across many refills of the random pool', () => {
    const tokens = Array.from({ length: 2000 }, () => randomToken());
    for (const token of tokens) expect(token).toMatch(/^[0-9A-Za-z]{24}$/);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(randomToken(32)).toMatch(/^[0-9A-Za-z]{32}$/);
    expect(newId('CS')).toMatch(/^CS_[0-9A-Za-z]{24}$/);
  });

  it('use every character of the alphabet about equally often (no modulo bias)', () => {
    const counts = new Map<string, number>();
    const draws = 62 * 2000;
    let seen = 0;
    while (seen < draws) {
      for (const c of randomToken(62)) counts.set(c, (counts.get(c) ?? 0) + 1);
      seen += 62;
    }
    expect(counts.size).toBe(62);
    // Expected 2,000 each; a binomial deviation beyond ±15 % has odds far below 1e-9.
    for (const n of counts.values()) expect(Math.abs(n - 2000)).toBeLessThan(300);
  });
});
