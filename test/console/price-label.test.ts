/**
 * How the console names a price (web/console/shared/price-label.ts). The walk-through's finding:
 * two prices of one product (monthly and yearly, or two metered ones) read the same wherever a price
 * was listed or chosen — both named after the product, the picker saying only the amount.
 */
import { describe, expect, it } from 'vitest';
import { distinctLabels, intervalText, priceLabel, priceLabels, priceName, priceTerms, type LabeledPrice } from '../../web/console/shared/price-label.js';

const price = (over: Partial<LabeledPrice>): LabeledPrice => ({
  pricingId: 'PRC_aaaaaaaaaaaaaaaaaaaaaaaa',
  pricingName: 'Pro',
  amount: 900,
  currency: 'EUR',
  pricingType: 'SUBSCRIPTION',
  billingInterval: 'MONTH',
  billingIntervalCount: 1,
  flexibleAmount: false,
  meteredComponents: [],
  ...over,
});

describe('price labels', () => {
  it('say the name, then amount and interval: "Monthly — €9.00 / month"', () => {
    expect(priceLabel(price({ pricingName: 'Monthly' }), { productName: 'Pro' })).toBe('Monthly — €9.00 / month');
    expect(priceLabel(price({ pricingName: 'Yearly', amount: 9000, billingInterval: 'YEAR' }), { productName: 'Pro' })).toBe('Yearly — €90.00 / year');
    expect(priceLabel(price({ pricingName: 'Quarterly', billingIntervalCount: 3 }))).toBe('Quarterly — €9.00 / 3 months');
    expect(priceLabel(price({ pricingName: 'Daily pass', billingInterval: 'DAY' }))).toBe('Daily pass — €9.00 / day');
  });

  it("leave out a name that is only the product's (the default), in any case", () => {
    expect(priceLabel(price({ pricingName: 'Pro' }), { productName: 'Pro' })).toBe('€9.00 / month');
    expect(priceLabel(price({ pricingName: 'pro ' }), { productName: 'Pro' })).toBe('€9.00 / month');
    // Across products the product leads.
    expect(priceLabel(price({ pricingName: 'Pro' }), { productName: 'Pro', withProduct: true })).toBe('Pro — €9.00 / month');
    expect(priceLabel(price({ pricingName: 'Yearly', billingInterval: 'YEAR', amount: 9000 }), { productName: 'Pro', withProduct: true, perSeat: true })).toBe('Pro — Yearly — €90.00 per seat / year');
    expect(priceName(price({ pricingName: 'Yearly' }), { productName: 'Pro', withProduct: true })).toBe('Pro — Yearly');
    expect(priceName(price({ pricingName: 'Pro' }), { productName: 'Pro' })).toBe('');
  });

  it('tell one-time, pay-what-you-want, trials, usage and credit packs apart', () => {
    expect(priceTerms(price({ pricingType: 'ONE_TIME', billingInterval: null, amount: 2500 }))).toBe('€25.00 one-time');
    expect(priceTerms(price({ pricingType: 'ONE_TIME', billingInterval: null, amount: 2000, flexibleAmount: true }))).toBe('pay what you want (suggested €20.00)');
    expect(priceTerms(price({ trialDays: 14 }))).toBe('€9.00 / month, 14-day free trial');
    const names: Record<string, string> = { MTR_tokens: 'tokens', MTR_images: 'images' };
    const meterName = (id: string) => names[id] ?? id;
    expect(priceTerms(price({ amount: 2000, currency: 'USD', meteredComponents: [{ meterId: 'MTR_tokens' }] }), { meterName })).toBe('$20.00 / month + usage of tokens');
    expect(priceTerms(price({ amount: 2000, currency: 'USD', meteredComponents: [{ meterId: 'MTR_images' }] }), { meterName })).toBe('$20.00 / month + usage of images');
    expect(priceTerms(price({ amount: 2000, currency: 'USD', meteredComponents: [{ meterId: 'MTR_unknown' }] }))).toBe('$20.00 / month + usage of MTR_unknown');
    expect(priceTerms(price({ pricingType: 'ONE_TIME', billingInterval: null, amount: 5000, currency: 'USD', grantsUnits: { meterId: 'MTR_tokens', units: 1_000_000 } }), { meterName })).toBe('$50.00 one-time, 1,000,000 tokens credits');
    expect(intervalText('YEAR', 2)).toBe('2 years');
  });

  it('make every label of a list distinct: two prices alike in name and terms end in their ids', () => {
    const a = price({ pricingId: 'PRC_a', pricingName: 'Pro' });
    const b = price({ pricingId: 'PRC_b', pricingName: 'Pro' });
    const yearly = price({ pricingId: 'PRC_y', pricingName: 'Pro', billingInterval: 'YEAR', amount: 9000 });
    const labels = priceLabels([a, b, yearly], { productName: 'Pro' });
    expect([...labels.values()]).toEqual(['€9.00 / month (PRC_a)', '€9.00 / month (PRC_b)', '€90.00 / year']);
    expect(new Set(labels.values()).size).toBe(3);
    // Per price options (a picker across products).
    const across = priceLabels([a, price({ pricingId: 'PRC_t', pricingName: 'Team' })], (p) => ({ productName: p.pricingId === 'PRC_a' ? 'Pro' : 'Team', withProduct: true, perSeat: true }));
    expect([...across.values()]).toEqual(['Pro — €9.00 per seat / month', 'Team — €9.00 per seat / month']);
    // Random lists: labels are always as many as the entries and all different.
    for (let round = 0; round < 200; round++) {
      const entries = Array.from({ length: 1 + (round % 7) }, (_, i) => ({ id: `PRC_${round}_${i}`, label: ['x', 'y', 'z'][Math.floor(Math.random() * 3)]! }));
      const out = distinctLabels(entries);
      expect(out.size).toBe(entries.length);
      expect(new Set(out.values()).size).toBe(entries.length);
    }
  });
});
