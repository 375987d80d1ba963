/**
 * `iso` is a hand-written `Date.prototype.toISOString()` (src/kernel/present.ts): pinned to it,
 * byte for byte, on fixed edges and many random instants, and on dates it hands over to it.
 */
import { describe, expect, it } from 'vitest';
import { iso, isoFromMs, isoOrNull } from '../../src/kernel/present.js';

const same = (d: Date) => {
  let theirs: string | Error;
  try {
    theirs = d.toISOString();
  } catch (err) {
    theirs = err as Error;
  }
  if (theirs instanceof Error) expect(() => iso(d), String(d.getTime())).toThrow(theirs.constructor as ErrorConstructor);
  else expect(iso(d), theirs).toBe(theirs);
};

describe('iso', () => {
  it('prints what toISOString prints on edges', () => {
    for (const text of [
      '2026-11-26T10:09:01.558Z',
      '2026-01-01T00:00:00.000Z',
      '2026-12-31T23:59:59.999Z',
      '2024-02-29T12:00:00.001Z',
      '1970-01-01T00:00:00.000Z',
      '1969-12-31T23:59:59.999Z',
      '1000-01-01T00:00:00.000Z',
      '0999-12-31T23:59:59.999Z',
      '9999-12-31T23:59:59.999Z',
      '+010000-01-01T00:00:00.000Z',
      '0000-01-01T00:00:00.000Z',
      '-000001-12-31T23:59:59.999Z',
    ]) {
      same(new Date(text));
    }
    same(new Date(8.64e15));
    same(new Date(-8.64e15));
    same(new Date(NaN));
    for (let ms = 0; ms < 1000; ms++) same(new Date(Date.UTC(2026, 10, 26, 9, 5, 7, ms)));
  });

  it('agrees with toISOString on random instants over the whole Date range', () => {
    let seed = 17;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 50_000; i++) {
      // Alternately anywhere a Date can be and within years 1000–9999 (the hand-written branch).
      const time = i % 2 === 0 ? (random() * 2 - 1) * 8.64e15 : -3e13 + random() * 2.83e14;
      same(new Date(Math.floor(time)));
    }
  });

  it('isoFromMs prints what toISOString prints: edges, random instants, a trace\'s close instants', () => {
    const edges = [0, -1, 1, 59_999, 60_000, -60_000, -60_001, -30610224000000, -30610224000001, 253402300799999, 253402300800000, 1.5, -0.5, 8.64e15, Date.UTC(2026, 10, 28, 23, 59, 59, 999), Date.UTC(2024, 1, 29, 12, 0, 0, 0)];
    for (const ms of edges) expect(isoFromMs(ms), String(ms)).toBe(new Date(ms).toISOString());
    expect(() => isoFromMs(NaN)).toThrow(RangeError);
    let seed = 7;
    const next = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.round((next() * 2 - 1) * 8.64e15);
      expect(isoFromMs(ms)).toBe(new Date(ms).toISOString());
    }
    const start = Date.UTC(2026, 10, 28, 5, 59, 58, 0);
    for (let ms = start; ms < start + 5000; ms += 7) expect(isoFromMs(ms)).toBe(new Date(ms).toISOString());
  });

  it('isoOrNull prints a date and passes absence on as null', () => {
    expect(isoOrNull(new Date('2026-11-26T10:09:01.558Z'))).toBe('2026-11-26T10:09:01.558Z');
    expect(isoOrNull(null)).toBeNull();
    expect(isoOrNull(undefined)).toBeNull();
  });
});
