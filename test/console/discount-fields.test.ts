/** The coupon and promotion-code forms' field checks (web/console/routes/catalog/lib/discount-fields.ts). */
import { describe, expect, it } from 'vitest';
import { hasExpired, parseRedemptionLimit, redemptionsText } from '../../web/console/routes/catalog/lib/discount-fields.js';

describe('coupon and promotion-code fields', () => {
  it('reads an optional redemption limit, or says what is wrong', () => {
    expect(parseRedemptionLimit('')).toEqual({ limit: undefined });
    expect(parseRedemptionLimit('  ')).toEqual({ limit: undefined });
    expect(parseRedemptionLimit('100')).toEqual({ limit: 100 });
    expect(parseRedemptionLimit(' 1,000 ')).toEqual({ limit: 1000 });
    expect(parseRedemptionLimit('100000000')).toEqual({ limit: 100_000_000 });
    for (const bad of ['0', '-1', '1.5', 'ten', '100000001', '1e3']) {
      expect(parseRedemptionLimit(bad), bad).toEqual({ problem: 'Enter a whole number from 1 to 100,000,000, or leave it empty for no limit.' });
    }
  });

  it('writes redemptions used of the limit, and whether an expiry passed', () => {
    expect(redemptionsText(3, 100)).toBe('3 of 100');
    expect(redemptionsText(3, null)).toBe('3');
    const now = new Date('2026-12-07T10:00:00Z');
    expect(hasExpired(null, now)).toBe(false);
    expect(hasExpired('2026-12-07T10:00:00Z', now)).toBe(true);
    expect(hasExpired('2026-12-07T10:00:01Z', now)).toBe(false);
  });
});
