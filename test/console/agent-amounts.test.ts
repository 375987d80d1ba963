/** The console's display of agent-wallet amounts: USDC base units (6 decimals) as exact USDC, other assets as base units. */
import { describe, expect, it } from 'vitest';
import { formatAmount } from '../../web/console/shared/format.js';

describe('formatAmount', () => {
  it('shows USDC base units as USDC, exactly, without trailing zeros', () => {
    expect(formatAmount('2000000', 'USDC')).toBe('2 USDC');
    expect(formatAmount('1500000', 'USDC')).toBe('1.5 USDC');
    expect(formatAmount('1', 'USDC')).toBe('0.000001 USDC');
    expect(formatAmount('0', 'USDC')).toBe('0 USDC');
    expect(formatAmount('123456789012345678901', 'USDC')).toBe('123456789012345.678901 USDC');
  });
  it('keeps other assets, and anything that is not a whole number, as base units', () => {
    expect(formatAmount('42', 'ETH')).toBe('42 base units of ETH');
    expect(formatAmount('42', null)).toBe('42 base units');
    expect(formatAmount('1e6', 'USDC')).toBe('1e6 base units of USDC');
  });
});
