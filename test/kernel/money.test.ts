/**
 * The one money formatter (src/kernel/money.ts), shown by the hosted pages, the portal, receipts,
 * buyer e-mails and the console alike: fixed cases, then properties over every currency Kassa
 * accepts (each ISO 4217 code Intl knows, for card prices, and the stablecoins) and random amounts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decimalsOf, formatMoney, formatUnitAmount, STABLECOINS } from '../../src/kernel/money.js';

/** What the product takes: every ISO 4217 code Intl knows for card prices (src/catalog/price-rules.ts's isFiatCurrency), USDC and USDT for crypto. */
const ACCEPTED = [...Intl.supportedValuesOf('currency').filter((code) => !STABLECOINS.has(code)), ...STABLECOINS];

/** The formatter's output split back into sign, what precedes the number, the number, what follows. */
const PARTS = /^(−?)([^\d]*?)(\d{1,3}(?:,\d{3})*)(?:\.(\d+))?((?: [A-Z]+)?)$/;

describe('formatMoney', () => {
  it('reads one way on every surface: symbol where unambiguous, ISO code otherwise, all decimals, a true minus', () => {
    expect(formatMoney(1500, 'USD')).toBe('$15.00');
    expect(formatMoney(5, 'usd')).toBe('$0.05');
    expect(formatMoney(0, 'USD')).toBe('$0.00');
    expect(formatMoney(-500, 'USD')).toBe('−$5.00');
    expect(formatMoney(1500, 'CAD')).toBe('CA$15.00');
    expect(formatMoney(1500, 'AUD')).toBe('A$15.00');
    expect(formatMoney(123456789, 'EUR')).toBe('€1,234,567.89');
    expect(formatMoney(1500, 'GBP')).toBe('£15.00');
    expect(formatMoney(1500, 'CHF')).toBe('CHF 15.00');
    expect(formatMoney(500, 'JPY')).toBe('¥500');
    expect(formatMoney(99_999_999, 'JPY')).toBe('¥99,999,999');
    expect(formatMoney(1500, 'KWD')).toBe('KWD 1.500');
    expect(formatMoney(-1, 'BHD')).toBe('−BHD 0.001');
    expect(formatMoney(99_999_999, 'KWD')).toBe('KWD 99,999.999');
    // Stored with two decimals, as Stripe's API takes them (not ICU's zero): the amount the API reports.
    expect(formatMoney(150000, 'HUF')).toBe('HUF 1,500.00');
    expect(formatMoney(25_000_000, 'USDC')).toBe('25.00 USDC');
    expect(formatMoney(1_234_567, 'USDT')).toBe('1.234567 USDT');
    expect(formatMoney(999_999_999_999, 'USDC')).toBe('999,999.999999 USDC');
    expect(formatMoney(-5_000_000, 'USDC')).toBe('−5.00 USDC');
    expect(formatMoney(Number.MAX_SAFE_INTEGER, 'USD')).toBe('$90,071,992,547,409.91');
  });

  it('is exact, signed and unambiguous for every accepted currency and any amount', () => {
    const symbols = new Map<string, string>();
    for (const currency of ACCEPTED) {
      const decimals = decimalsOf(currency);
      expect([0, 2, 3, 6], currency).toContain(decimals);
      fc.assert(
        fc.property(fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), (minor) => {
          const text = formatMoney(minor, currency);
          const parts = PARTS.exec(text);
          expect(parts, `${minor} ${currency} → ${text}`).not.toBeNull();
          const [, sign, before, whole, fraction = '', after] = parts!;
          expect(sign).toBe(minor < 0 ? '−' : '');
          expect(text.includes('-')).toBe(false);
          // Exactly the stored digits: the whole part and the fraction read back as the minor units.
          const shown = BigInt(whole!.replaceAll(',', '') + fraction.padEnd(decimals, '0'));
          expect(shown).toBe(BigInt(Math.abs(minor)));
          if (STABLECOINS.has(currency)) {
            expect([before, after]).toEqual(['', ` ${currency}`]);
            expect(fraction.length).toBeGreaterThanOrEqual(2);
          } else {
            expect(after).toBe('');
            expect(before).not.toBe('');
            expect(fraction.length).toBe(decimals);
            symbols.set(currency, before!);
          }
          expect(formatMoney(-minor, currency)).toBe(minor === 0 ? text : minor < 0 ? text.slice(1) : `−${text}`);
        }),
        { numRuns: 25 },
      );
    }
    // No two currencies look alike: `$` is USD's alone, and a symbol either is the code or names only it.
    const bySymbol = new Map<string, string[]>();
    for (const [currency, symbol] of symbols) bySymbol.set(symbol, [...(bySymbol.get(symbol) ?? []), currency]);
    expect([...bySymbol].filter(([, codes]) => codes.length > 1)).toEqual([]);
    expect(symbols.get('USD')).toBe('$');
  });
});

describe('formatUnitAmount', () => {
  it('shows the currency’s decimals at least and only the digits the price has beyond them', () => {
    expect(formatUnitAmount('0.004', 'USD')).toBe('$0.00004');
    expect(formatUnitAmount('900', 'USD')).toBe('$9.00');
    expect(formatUnitAmount('900.000', 'USD')).toBe('$9.00');
    expect(formatUnitAmount('0.5', 'JPY')).toBe('¥0.5');
    expect(formatUnitAmount('1234567.25', 'KWD')).toBe('KWD 1,234.56725');
    expect(formatUnitAmount('1.5', 'USDC')).toBe('0.0000015 USDC');
  });

  it('agrees with formatMoney on whole minor units', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ACCEPTED), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (currency, minor) => {
        expect(formatUnitAmount(String(minor), currency)).toBe(formatMoney(minor, currency));
      }),
    );
  });
});
