/** The console's pure helpers (web/console/shared/format.ts): money, dates, ranges, filters ↔ URL. */
import { describe, expect, it } from 'vitest';
import {
  addDays,
  addMonths,
  classifySearch,
  currencyDecimals,
  filtersToQuery,
  formatChange,
  formatDateTime,
  formatMoney,
  localDate,
  localMidnightUnix,
  minorToInput,
  parseMoney,
  usageUnitAmountDecimal,
  queryToFilters,
  rangeFor,
  formatUnitAmount,
  formatQuantity,
} from '../../web/console/shared/format.js';
import { safeNext } from '../../web/console/routes/sign-in/next.js';
import { explorerTxUrl, stripeDashboardUrl } from '../../web/console/shared/links.js';
import { orderTimeline } from '../../web/console/routes/orders/components/order-timeline-entries.js';

describe('money', () => {
  it('formats minor units by the currency’s decimals, without floating point', () => {
    expect(formatMoney(5800, 'USD')).toBe('$58.00');
    expect(formatMoney(5, 'usd')).toBe('$0.05');
    expect(formatMoney(123456789, 'EUR')).toBe('€1,234,567.89');
    expect(formatMoney(500, 'JPY')).toBe('¥500');
    expect(formatMoney(25_000_000, 'USDC')).toBe('25.00 USDC');
    expect(formatMoney(1_234_567, 'USDT')).toBe('1.234567 USDT');
    expect(formatMoney(9_007_199_254_740_991, 'USD')).toBe('$90,071,992,547,409.91');
    expect(formatMoney(-1000, 'USD')).toBe('−$10.00');
    expect(currencyDecimals('USDC')).toBe(6);
    expect(currencyDecimals('KWD')).toBe(3);
    expect(formatMoney(1500, 'KWD')).toBe('KWD 1.500');
  });

  it('counts a currency’s decimals as the server stores them (not as ICU does)', () => {
    // ICU gives ISK and HUF no decimals; Kassa stores them with two (Stripe's API does): typing 1500
    // into a refund or price form is 150000 minor units, as the API's `amount` of 1500 says.
    expect(currencyDecimals('ISK')).toBe(2);
    expect(parseMoney('1500', 'ISK')).toBe(150000);
    expect(minorToInput(150000, 'HUF')).toBe('1500.00');
    expect(formatMoney(150000, 'ISK')).toBe('ISK 1,500.00');
  });
});

describe('time', () => {
  it('formats an instant in a time zone, and a missing one as a dash', () => {
    expect(formatDateTime('2026-11-22T09:31:02.417Z', 'UTC')).toBe('Nov 22, 2026, 09:31');
    expect(formatDateTime('2026-11-22T23:31:02.417Z', 'Europe/Paris')).toBe('Nov 23, 2026, 00:31');
    expect(formatDateTime(null)).toBe('—');
    expect(formatDateTime('not a date')).toBe('—');
  });

  it('finds local dates and midnights across time zones and DST', () => {
    expect(localDate(new Date('2026-11-22T23:30:00Z'), 'Europe/Paris')).toBe('2026-11-23');
    expect(localDate(new Date('2026-11-22T03:30:00Z'), 'America/New_York')).toBe('2026-11-21');
    expect(localMidnightUnix('2026-11-22', 'UTC')).toBe(Date.parse('2026-11-22T00:00:00Z') / 1000);
    expect(localMidnightUnix('2026-11-22', 'Europe/Paris')).toBe(Date.parse('2026-11-21T23:00:00Z') / 1000);
    // The day summer time starts in Paris (the clocks jump at 02:00): midnight is still +01:00.
    expect(localMidnightUnix('2026-03-29', 'Europe/Paris')).toBe(Date.parse('2026-03-28T23:00:00Z') / 1000);
    expect(localMidnightUnix('2026-03-30', 'Europe/Paris')).toBe(Date.parse('2026-03-29T22:00:00Z') / 1000);
  });

  it('moves dates on the calendar, clamping month ends', () => {
    expect(addDays('2026-03-01', -1)).toBe('2026-02-28');
    expect(addDays('2028-02-28', 1)).toBe('2028-02-29');
    expect(addMonths('2026-01-31', 1)).toBe('2026-02-28');
    expect(addMonths('2026-12-15', 1)).toBe('2027-01-15');
    expect(addMonths('2026-03-31', -1)).toBe('2026-02-28');
  });

  it('gives the home page’s ranges ending today', () => {
    expect(rangeFor('7d', '2026-11-28')).toEqual({ start: '2026-11-22', end: '2026-11-28', interval: 'day' });
    expect(rangeFor('30d', '2026-11-28')).toEqual({ start: '2026-10-30', end: '2026-11-28', interval: 'day' });
    expect(rangeFor('90d', '2026-11-28')).toEqual({ start: '2026-08-31', end: '2026-11-28', interval: 'week' });
    expect(rangeFor('12m', '2026-11-28')).toEqual({ start: '2025-12-01', end: '2026-11-28', interval: 'month' });
  });

  it('says a change from yesterday in words a reader takes in at once', () => {
    expect(formatChange(150, 100)).toBe('+50%');
    expect(formatChange(97, 100)).toBe('−3%');
    expect(formatChange(100, 100)).toBe('0%');
    expect(formatChange(5, 0)).toBe('new');
    expect(formatChange(0, 0)).toBe('—');
    expect(formatChange(1, 3)).toBe('−66.7%');
  });
});

describe('filters ↔ URL', () => {
  it('writes the same filters as the same query, without empty values', () => {
    expect(filtersToQuery({ status: 'paid', customer_id: '', provider: undefined, page: null })).toBe('?status=paid');
    expect(filtersToQuery({ b: '2', a: 'x y&z' })).toBe('?a=x+y%26z&b=2');
    expect(filtersToQuery({})).toBe('');
    expect(filtersToQuery({ date_from: 0 })).toBe('?date_from=0');
  });

  it('reads back only the known keys, trimmed', () => {
    expect(queryToFilters({ status: ' paid ', nonsense: 'x', provider: '' }, ['status', 'provider'] as const)).toEqual({ status: 'paid' });
  });

  it('tells what a search is', () => {
    expect(classifySearch(' ORD_abc ')).toEqual({ kind: 'order', value: 'ORD_abc' });
    expect(classifySearch('CUS_1').kind).toBe('customer');
    expect(classifySearch('SUB_1').kind).toBe('subscription');
    expect(classifySearch(`0x${'a'.repeat(64)}`).kind).toBe('tx');
    // Any case; the prefix as the API's tx_hash pattern wants it. One digit short or long is a reference.
    expect(classifySearch(` 0X${'Ab'.repeat(32)} `)).toEqual({ kind: 'tx', value: `0x${'Ab'.repeat(32)}` });
    expect(classifySearch(`0x${'a'.repeat(63)}`).kind).toBe('reference');
    expect(classifySearch(`0x${'a'.repeat(65)}`).kind).toBe('reference');
    expect(classifySearch(`0x${'g'.repeat(64)}`).kind).toBe('reference');
    expect(classifySearch('ada@example.com').kind).toBe('email');
    expect(classifySearch('invoice-10042').kind).toBe('reference');
  });

  it('returns after sign-in only to a console page', () => {
    expect(safeNext('/console/orders?status=paid')).toBe('/console/orders?status=paid');
    expect(safeNext('https://evil.example/')).toBe('/console/');
    expect(safeNext('//evil.example/console/')).toBe('/console/');
    expect(safeNext('/console/\\evil')).toBe('/console/');
    expect(safeNext(undefined)).toBe('/console/');
  });
});

describe('amounts typed in forms, processor links, the order timeline', () => {
  it('reads an amount in the currency’s units as minor units, or refuses it', () => {
    expect(parseMoney('24.50', 'USD')).toBe(2450);
    expect(parseMoney(' 1,234.5 ', 'USD')).toBe(123450);
    expect(parseMoney('10', 'JPY')).toBe(10);
    expect(parseMoney('1.5', 'JPY')).toBeUndefined();
    expect(parseMoney('0.000001', 'USDC')).toBe(1);
    expect(parseMoney('1.001', 'USD')).toBeUndefined();
    expect(parseMoney('0', 'USD')).toBeUndefined();
    expect(parseMoney('-5', 'USD')).toBeUndefined();
    expect(parseMoney('5e3', 'USD')).toBeUndefined();
    expect(minorToInput(2450, 'USD')).toBe('24.50');
    expect(minorToInput(5, 'USD')).toBe('0.05');
    expect(minorToInput(500, 'JPY')).toBe('500');
  });

  it('links a payment to the processor’s own page', () => {
    expect(stripeDashboardUrl('pi_123')).toBe('https://dashboard.stripe.com/payments/pi_123');
    expect(stripeDashboardUrl('sub_1')).toBe('https://dashboard.stripe.com/subscriptions/sub_1');
    expect(stripeDashboardUrl('sandbox_1')).toBeUndefined();
    expect(explorerTxUrl('eip155:8453', `0x${'ab'.repeat(32)}`)).toBe(`https://basescan.org/tx/0x${'ab'.repeat(32)}`);
    expect(explorerTxUrl('eip155:31337', `0x${'ab'.repeat(32)}`)).toBeUndefined();
    expect(explorerTxUrl('eip155:1', '0xnot-a-hash')).toBeUndefined();
  });

  it('orders an order’s history: created, paid, refunds and disputes by time', () => {
    const order = { orderId: 'ORD_1', status: 'PAID', amountCents: 5000, currency: 'USD', createdAt: '2026-11-22T09:00:00.000Z', updatedAt: '2026-11-22T09:01:00.000Z' } as Parameters<typeof orderTimeline>[0];
    const refund = { amountCents: 1000, currency: 'USD', status: 'succeeded', reason: 'duplicate', createdAt: '2026-11-23T10:00:00.000Z' } as Parameters<typeof orderTimeline>[1][number];
    const dispute = { amountCents: 4000, currency: 'USD', createdAt: '2026-11-22T12:00:00.000Z', closedAt: '2026-11-24T12:00:00.000Z', outcome: 'won' } as Parameters<typeof orderTimeline>[2][number];
    expect(orderTimeline(order, [refund], [dispute]).map((e) => e.label)).toEqual(['Created', 'Paid $50.00', 'Dispute opened: $40.00', 'Refunded $10.00 (duplicate)', 'Dispute closed: won']);
  });
});

describe('formatUnitAmount and formatQuantity (order lines)', () => {
  it('shows exact unit prices of fractions of a minor unit, and the currency decimals at least', () => {
    expect(formatUnitAmount('0.004', 'USD')).toBe('$0.00004');
    expect(formatUnitAmount('900', 'USD')).toBe('$9.00');
    expect(formatUnitAmount('123456.5', 'USD')).toBe('$1,234.565');
    expect(formatUnitAmount('0.5', 'JPY')).toBe('¥0.5');
    expect(formatUnitAmount('25000000', 'USDC')).toBe('25.00 USDC');
    expect(formatQuantity('1234567.25')).toBe('1,234,567.25');
  });
});

describe('formatAxisValue (issue 37, item 25: the home chart names its currency)', () => {
  it('writes the currency on every money tick, compact, in major units', async () => {
    const { formatAxisValue } = await import('../../web/console/shared/format.js');
    expect(formatAxisValue(150_000, 'USD')).toBe('$1.5K');
    expect(formatAxisValue(20_000, 'EUR')).toBe('€200');
    expect(formatAxisValue(25_000_000, 'USDC')).toBe('25 USDC');
    expect(formatAxisValue(1500)).toBe('1.5K');
  });
});

describe('usageUnitAmountDecimal (the console price form\'s usage price)', () => {
  it('turns an amount per 1, 100, 1,000 or 1,000,000 units into minor units per unit, exactly', () => {
    expect(usageUnitAmountDecimal('0.04', 'USD', 1000)).toBe('0.004'); // docs/usage-billing.md's 0.04 USD per 1,000 tokens
    expect(usageUnitAmountDecimal('2', 'USD', 1)).toBe('200');
    expect(usageUnitAmountDecimal('1.5', 'EUR', 1_000_000)).toBe('0.00015');
    expect(usageUnitAmountDecimal('0.000001', 'USD', 1)).toBe('0.0001');
    expect(usageUnitAmountDecimal('3', 'JPY', 100)).toBe('0.03');
    expect(usageUnitAmountDecimal('1,000', 'USD', 1000)).toBe('100');
  });
  it('refuses what is not a positive amount or needs more than 12 fraction digits', () => {
    for (const text of ['', '0', '0.00', '-1', 'abc', '1.2.3']) expect(usageUnitAmountDecimal(text, 'USD', 1)).toBeUndefined();
    expect(usageUnitAmountDecimal('0.0000000000001', 'USD', 1_000_000)).toBeUndefined();
  });
});
