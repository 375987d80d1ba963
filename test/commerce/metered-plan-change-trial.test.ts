/**
 * periodUsageLineInputs (a period split by plan changes, src/commerce/metered-plan-change.ts) and a
 * free trial (docs/trials.md, "Usage during a trial"): each part is read through usageLineInputs
 * with the subscription's `trialEnd`, so a part wholly inside the trial bills nothing and a part
 * straddling the trial's end is read from it — the rule of an unsplit period. No database: the
 * meter's quantities are the events below, summed over the range asked.
 */
import { describe, expect, it } from 'vitest';
import type { MeteredBilling, MeteredComponent } from '../../src/commerce/metered-billing.js';
import { periodUsageLineInputs, usageParts } from '../../src/commerce/metered-plan-change.js';
import type { UsageSegment } from '../../src/commerce/stores.js';

const at = (iso: string) => new Date(iso);
const EVENTS: Array<[string, number]> = [
  ['2027-09-02T00:00:00Z', 300_000],
  ['2027-09-06T00:00:00Z', 900_000],
  ['2027-09-10T00:00:00Z', 7_000],
  ['2027-09-20T00:00:00Z', 60_000],
];
const reads: Array<[string, string]> = [];
const COMPONENTS: Record<string, MeteredComponent[]> = {
  basic: [{ meterId: 'MTR_tokens', includedUnits: 10_000, pricing: { model: 'PER_UNIT', unitAmount: '0.004' } }],
  pro: [{ meterId: 'MTR_tokens', includedUnits: 50_000, pricing: { model: 'PER_UNIT', unitAmount: '0.002' } }],
};
const billing: MeteredBilling = {
  componentsOf: async (_org, priceId) => COMPONENTS[priceId] ?? [],
  meters: { find: async (_org, id) => ({ id, name: 'Tokens', archived: false }) },
  quantities: {
    quantity: async (_org, _meter, _customer, start, end) => {
      reads.push([start.toISOString(), end.toISOString()]);
      return EVENTS.filter(([ts]) => Date.parse(ts) >= start.getTime() && Date.parse(ts) < end.getTime()).reduce((t, [, q]) => t + q, 0);
    },
  },
};
const sub = (periodStart: string, periodEnd: string, trialEnd: string | null) => ({
  id: 'SUB_1',
  orgId: 'ORG_1',
  customerId: 'CUS_1',
  priceId: 'pro',
  productName: 'Pro',
  currentPeriodStart: at(periodStart),
  currentPeriodEnd: at(periodEnd),
  trialEnd: trialEnd === null ? null : at(trialEnd),
});
const segment = (start: string, end: string): UsageSegment => ({ subscriptionId: 'SUB_1', orgId: 'ORG_1', periodNumber: 0, seq: 1, priceId: 'basic', productName: 'Basic', start: at(start), end: at(end), createdAt: at(end) });

describe('periodUsageLineInputs and a free trial', () => {
  it('a change during the trial: neither part is read or billed (no USAGE line)', async () => {
    const s = sub('2027-09-01T00:00:00Z', '2027-09-08T00:00:00Z', '2027-09-08T00:00:00Z');
    const parts = await usageParts(billing, s, COMPONENTS.pro!, [segment('2027-09-01T00:00:00Z', '2027-09-04T00:00:00Z')], s.currentPeriodEnd);
    expect(parts).toHaveLength(2);
    reads.length = 0;
    expect(await periodUsageLineInputs(billing, s, parts)).toEqual([]);
    expect(reads).toEqual([]);
  });

  it('a split period holding the trial’s end (trial time in its first part): the first part is read from trialEnd, the second whole', async () => {
    // Not a period Kassa makes (period 0 ends at trialEnd), but the rule holds for any range.
    const s = sub('2027-09-01T00:00:00Z', '2027-10-01T00:00:00Z', '2027-09-08T00:00:00Z');
    const parts = await usageParts(billing, s, COMPONENTS.pro!, [segment('2027-09-01T00:00:00Z', '2027-09-15T00:00:00Z')], s.currentPeriodEnd);
    reads.length = 0;
    const lines = await periodUsageLineInputs(billing, s, parts);
    expect(reads).toEqual([
      ['2027-09-08T00:00:00.000Z', '2027-09-15T00:00:00.000Z'],
      ['2027-09-15T00:00:00.000Z', '2027-10-01T00:00:00.000Z'],
    ]);
    expect(lines.map((l) => (l.kind === 'USAGE' ? [l.description, l.quantity, l.includedUnits] : l.kind))).toEqual([
      // 10,000 × 14/30 = 4,666.7 → 4,667; 50,000 × 16/30 = 26,666.7 → 26,667.
      ['Tokens on Basic until 15 September 2027', 7_000, 4_667],
      ['Tokens on Pro from 15 September 2027', 60_000, 26_667],
    ]);
  });

  it('without a trial the same parts read from the period’s start (the trial rule is what cut the reads above)', async () => {
    const s = sub('2027-09-01T00:00:00Z', '2027-10-01T00:00:00Z', null);
    const parts = await usageParts(billing, s, COMPONENTS.pro!, [segment('2027-09-01T00:00:00Z', '2027-09-15T00:00:00Z')], s.currentPeriodEnd);
    const lines = await periodUsageLineInputs(billing, s, parts);
    expect(lines.map((l) => (l.kind === 'USAGE' ? l.quantity : null))).toEqual([1_207_000, 60_000]);
  });
});
