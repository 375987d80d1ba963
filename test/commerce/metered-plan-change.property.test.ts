/**
 * The renewal's USAGE lines of a period split by plan changes (src/commerce/metered-plan-change.ts,
 * docs/plan-changes.md "Metered prices"), without a database: for random periods, 0–3 changes at
 * random seconds between random prices (per unit, package, graduated, volume, included units, or no
 * metered components), random usage events and a random prepaid credit balance, the lines Kassa
 * makes (usageParts → periodUsageLineInputs → drawCredits → pricePeriod) equal an independent
 * recomputation: each part's quantity is the sum of its events in [part start, part end); its
 * included units includedUnits × part seconds / period seconds rounded half up (the whole
 * includedUnits when nothing changed); credits per meter drawn once, given to its lines in order;
 * each line's amount its exact amount (fixed point, BigInt) rounded once, half up; the total their sum.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { drawCredits, type MeteredBilling, type MeteredComponent } from '../../src/commerce/metered-billing.js';
import { periodUsageLineInputs, usageParts } from '../../src/commerce/metered-plan-change.js';
import { pricePeriod, type UsagePricing } from '../../src/commerce/pricing.js';
import type { UsageSegment } from '../../src/commerce/stores.js';

const RUNS = Number(process.env.KASSA_METERED_CHANGE_RUNS ?? 1000);
const METERS = ['MTR_a', 'MTR_b'];

// ---- recomputation (10^-12 of a minor unit; no code of src/commerce) ----
const SCALE = 10n ** 12n;
const fixed = (text: string): bigint => {
  const [w, f = ''] = text.split('.');
  return BigInt(w!) * SCALE + BigInt((f + '0'.repeat(12)).slice(0, 12));
};
const halfUp = (n: bigint, d: bigint): bigint => (2n * n + d) / (2n * d);
function exactAmount(billable: bigint, p: UsagePricing): bigint {
  if (p.model === 'PER_UNIT') return billable * fixed(p.unitAmount);
  if (p.model === 'PACKAGE') return ((billable + BigInt(p.packageSize) - 1n) / BigInt(p.packageSize)) * fixed(p.packageAmount);
  if (p.model === 'GRADUATED') {
    let exact = 0n;
    let lower = 0n;
    for (const t of p.tiers) {
      const upper = t.upTo === null ? billable : BigInt(t.upTo);
      const inTier = (billable < upper ? billable : upper) - lower;
      if (inTier > 0n) exact += inTier * fixed(t.unitAmount) + BigInt(t.flatAmount ?? 0) * SCALE;
      if (t.upTo === null || billable <= upper) break;
      lower = upper;
    }
    return exact;
  }
  if (billable === 0n) return 0n;
  const t = p.tiers.find((x) => x.upTo === null || billable <= BigInt(x.upTo))!;
  return billable * fixed(t.unitAmount) + BigInt(t.flatAmount ?? 0) * SCALE;
}

// ---- generators ----
const decimal = fc.tuple(fc.integer({ min: 0, max: 500 }), fc.integer({ min: 0, max: 999 })).map(([w, f]) => `${w}.${String(f).padStart(3, '0')}`.replace(/\.?0+$/, '') || '0');
const tiers = fc
  .tuple(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1, max: 500 }), decimal, decimal, fc.integer({ min: 0, max: 50 }))
  .map(([a, b, u1, u2, flat]) => [
    { upTo: a, unitAmount: u1 },
    { upTo: a + b, unitAmount: u2, flatAmount: flat },
    { upTo: null, unitAmount: '0.5' },
  ]);
const pricing: fc.Arbitrary<UsagePricing> = fc.oneof(
  decimal.map((unitAmount) => ({ model: 'PER_UNIT' as const, unitAmount })),
  fc.tuple(fc.integer({ min: 1, max: 100 }), decimal).map(([packageSize, packageAmount]) => ({ model: 'PACKAGE' as const, packageSize, packageAmount })),
  tiers.map((t) => ({ model: 'GRADUATED' as const, tiers: t })),
  tiers.map((t) => ({ model: 'VOLUME' as const, tiers: t })),
);
const priceComponents: fc.Arbitrary<MeteredComponent[]> = fc.oneof(
  fc.constant([] as MeteredComponent[]),
  fc.subarray(METERS, { minLength: 1 }).chain((meters) => fc.tuple(...meters.map((meterId) => fc.record({ meterId: fc.constant(meterId), includedUnits: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })), pricing })))),
);
const DAY = 86_400;
const scenario = fc.record({
  periodStartMs: fc.integer({ min: Date.parse('2026-01-01T00:00:00Z'), max: Date.parse('2027-01-01T00:00:00Z') }),
  periodDays: fc.integer({ min: 28, max: 31 }),
  prices: fc.array(priceComponents, { minLength: 4, maxLength: 4 }),
  /** Change instants as fractions of the period (seconds picked from them), and the price taken at each. */
  changes: fc.array(fc.tuple(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 1, max: 3 })), { maxLength: 3 }),
  events: fc.array(fc.tuple(fc.constantFrom(...METERS), fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 0, max: 3000 })), { maxLength: 40 }),
  credits: fc.record({ MTR_a: fc.integer({ min: 0, max: 4000 }), MTR_b: fc.integer({ min: 0, max: 4000 }) }),
});

describe('renewal usage lines across plan changes (metered-plan-change.ts)', () => {
  it(`equal an independent recomputation (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (sc) => {
        const start = new Date(sc.periodStartMs);
        const periodSeconds = sc.periodDays * DAY;
        const end = new Date(sc.periodStartMs + periodSeconds * 1000);
        // The change seconds, whole seconds after the period's start (the proration's clock), distinct, ordered.
        const startSecond = Math.floor(sc.periodStartMs / 1000);
        const atSeconds = [...new Set(sc.changes.map(([f]) => startSecond + 1 + Math.floor(((periodSeconds - 2) * f) / 10_000)))].sort((a, b) => a - b);
        const plans = [0, ...atSeconds.map((_, i) => sc.changes[i]![1])];
        // Consecutive parts on the same price are what a change would not record (same price): skip those changes.
        const bounds: Array<{ plan: number; from: Date }> = [{ plan: 0, from: start }];
        atSeconds.forEach((s, i) => {
          if (plans[i + 1] !== bounds[bounds.length - 1]!.plan) bounds.push({ plan: plans[i + 1]!, from: new Date(s * 1000) });
        });
        const segments: UsageSegment[] = bounds.slice(0, -1).map((b, i) => ({ subscriptionId: 'SUB_x', orgId: 'ORG_x', periodNumber: 3, seq: i + 1, priceId: `PRC_${b.plan}`, productName: `Plan ${b.plan}`, start: b.from, end: bounds[i + 1]!.from, createdAt: bounds[i + 1]!.from }));
        const current = bounds[bounds.length - 1]!.plan;
        const events = sc.events.map(([meterId, f, value]) => ({ meterId, ts: sc.periodStartMs + Math.floor((periodSeconds * 1000 * f) / 10_000), value }));
        const billing: MeteredBilling = {
          componentsOf: async (_org, priceId) => sc.prices[Number(priceId.slice(4))]!,
          meters: { find: async (_org, id) => ({ id, name: id === 'MTR_a' ? 'Tokens' : 'Requests', archived: false }) },
          quantities: { quantity: async (_org, meterId, _c, from, to) => events.filter((e) => e.meterId === meterId && e.ts >= from.getTime() && e.ts < to.getTime()).reduce((t, e) => t + e.value, 0) },
        };
        const s = { id: 'SUB_x', orgId: 'ORG_x', customerId: 'CUS_x', periodNumber: 3, priceId: `PRC_${current}`, productName: `Plan ${current}`, currentPeriodStart: start, currentPeriodEnd: end };
        const parts = await usageParts(billing, s, sc.prices[current]!, segments, end);
        const balances = new Map(Object.entries(sc.credits));
        const drawsMade: string[] = [];
        const credits = {
          draw: async (e: { meterId: string; wanted: number }) => {
            expect(drawsMade).not.toContain(e.meterId); // one draw per meter and period
            drawsMade.push(e.meterId);
            const units = Math.min(balances.get(e.meterId) ?? 0, e.wanted);
            return units;
          },
        } as unknown as Parameters<typeof drawCredits>[0]['credits'];
        const inputs = await drawCredits({ credits }, s, await periodUsageLineInputs(billing, s, parts), new Date());
        const priced = pricePeriod(inputs);

        // The recomputation.
        const expected: Array<{ meterId: string; quantity: bigint; included: bigint; wanted: bigint }> = [];
        bounds.forEach((b, i) => {
          const partEnd = i < bounds.length - 1 ? bounds[i + 1]!.from.getTime() : end.getTime();
          for (const c of sc.prices[b.plan]!) {
            const quantity = BigInt(events.filter((e) => e.meterId === c.meterId && e.ts >= b.from.getTime() && e.ts < partEnd).reduce((t, e) => t + e.value, 0));
            const partSeconds = BigInt(Math.floor((i < bounds.length - 1 ? partEnd : end.getTime()) / 1000) - Math.floor(b.from.getTime() / 1000));
            const included = bounds.length === 1 ? BigInt(c.includedUnits) : halfUp(BigInt(c.includedUnits) * partSeconds, BigInt(periodSeconds));
            expected.push({ meterId: c.meterId, quantity, included, wanted: quantity > included ? quantity - included : 0n });
          }
        });
        const left = new Map<string, bigint>();
        for (const m of METERS) {
          const wanted = expected.filter((e) => e.meterId === m).reduce((t, e) => t + e.wanted, 0n);
          left.set(m, wanted < BigInt(sc.credits[m as 'MTR_a']) ? wanted : BigInt(sc.credits[m as 'MTR_a']));
        }
        let total = 0n;
        const lines = bounds.flatMap((b, i) =>
          sc.prices[b.plan]!.map((c) => {
            const e = expected.shift()!;
            const available = left.get(c.meterId)!;
            const credited = e.wanted < available ? e.wanted : available;
            left.set(c.meterId, available - credited);
            const billable = e.wanted - credited;
            const amount = halfUp(exactAmount(billable, c.pricing), SCALE);
            total += amount;
            return { quantity: e.quantity.toString(), includedUnits: Number(e.included), creditedUnits: Number(credited), amount: Number(amount), part: i };
          }),
        );
        expect(priced.lines.map((l) => ({ quantity: l.quantity, includedUnits: l.includedUnits, creditedUnits: l.creditedUnits, amount: l.amount }))).toEqual(lines.map(({ part: _part, ...l }) => l));
        expect(BigInt(priced.total)).toBe(total);
        // Descriptions name the part once a period is split.
        if (bounds.length > 1) for (const l of priced.lines) expect(l.description).toMatch(/ on Plan \d (until|from) \d{1,2} \w+ \d{4}$/);
      }),
      { numRuns: RUNS },
    );
  });
});
