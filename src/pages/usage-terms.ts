/**
 * A subscription price's metered components in words, for the hosted checkout page (issue 38): what
 * the buyer will be charged for usage, stated before paying. One line per component: "Plus usage of
 * Tokens: $0.04 per 1,000 after 10,000 included each month". Rates are shown per 1, 1,000,
 * 1,000,000 or 1,000,000,000 units: the smallest of those at which each rate is a whole number of
 * the currency's minor units (0.004 cent per token reads "$0.04 per 1,000"). Tiers: up to three
 * listed ("$0.05 per 1,000 up to 100,000, then $0.03 per 1,000"), more as the range of their rates.
 * Text only; callers escape it.
 */
import type { UsageTerm } from '../commerce/model.js';
import type { PriceTier } from '../commerce/pricing.js';
import { formatMoney, formatUnitAmount } from '../kernel/money.js';

const SCALES = [1n, 1_000n, 1_000_000n, 1_000_000_000n];

const count = (n: number | bigint): string => BigInt(n).toLocaleString('en-US');

/** A non-negative decimal (minor units) as an exact fraction. */
function fraction(decimal: string): { n: bigint; d: bigint } {
  const [whole = '0', frac = ''] = decimal.replace(/^\+/, '').split('.');
  return { n: BigInt(`${whole}${frac}` || '0'), d: 10n ** BigInt(frac.length) };
}

/** The smallest scale at which every non-zero rate is a whole number of minor units (else the largest). */
function scaleFor(rates: readonly string[]): bigint {
  const nonZero = rates.map(fraction).filter((f) => f.n > 0n);
  return SCALES.find((s) => nonZero.every((f) => (f.n * s) % f.d === 0n)) ?? SCALES[SCALES.length - 1]!;
}

/** `rate` (minor units per unit) × `scale` as money, exactly. */
function scaled(rate: string, scale: bigint, currency: string): string {
  const f = fraction(rate);
  const whole = (f.n * scale) / f.d;
  if ((f.n * scale) % f.d === 0n && whole <= BigInt(Number.MAX_SAFE_INTEGER)) return formatMoney(Number(whole), currency);
  // Finer than every scale: the exact decimal, per unit.
  return formatUnitAmount(rate, currency);
}

const per = (scale: bigint): string => (scale === 1n ? ' per unit' : ` per ${count(scale)}`);

function rateText(rate: string, scale: bigint, currency: string): string {
  return fraction(rate).n === 0n ? 'free' : `${scaled(rate, scale, currency)}${per(scale)}`;
}

function tiersText(model: 'GRADUATED' | 'VOLUME', tiers: readonly PriceTier[], currency: string): string {
  const scale = scaleFor(tiers.map((t) => t.unitAmount));
  const flat = (t: PriceTier) => (t.flatAmount ? ` plus ${formatMoney(t.flatAmount, currency)}` : '');
  if (model === 'GRADUATED' && tiers.length <= 3) {
    return tiers
      .map((t, i) => `${i === 0 ? '' : 'then '}${rateText(t.unitAmount, scale, currency)}${flat(t)}${t.upTo !== null ? ` up to ${count(t.upTo)}` : ''}`)
      .join(', ');
  }
  const rates = tiers.map((t) => fraction(t.unitAmount));
  const value = (f: { n: bigint; d: bigint }) => Number(f.n) / Number(f.d);
  const low = tiers[rates.reduce((best, f, i) => (value(f) < value(rates[best]!) ? i : best), 0)]!;
  const high = tiers[rates.reduce((best, f, i) => (value(f) > value(rates[best]!) ? i : best), 0)]!;
  const range = low.unitAmount === high.unitAmount ? rateText(low.unitAmount, scale, currency) : `from ${rateText(low.unitAmount, scale, currency)} to ${rateText(high.unitAmount, scale, currency)}`;
  const kind = model === 'GRADUATED' ? 'graduated tiers: each unit at its tier’s rate' : 'volume tiers: every unit at the rate of the tier the total reaches';
  return `${range} in ${tiers.length} ${kind}${tiers.some((t) => t.flatAmount) ? ', plus flat fees per tier' : ''}`;
}

/** The component's price in words: "$0.04 per 1,000". */
export function usageRate(term: Pick<UsageTerm, 'pricing'>, currency: string): string {
  const p = term.pricing;
  switch (p.model) {
    case 'PER_UNIT': {
      const scale = scaleFor([p.unitAmount]);
      return rateText(p.unitAmount, scale, currency);
    }
    case 'PACKAGE':
      return `${formatUnitAmount(p.packageAmount, currency)} per started block of ${count(p.packageSize)}`;
    case 'GRADUATED':
    case 'VOLUME':
      return tiersText(p.model, p.tiers, currency);
  }
}

/** "Plus usage of Tokens: $0.04 per 1,000 after 10,000 included each month". `period`: "month", "3 months". */
export function usageTermText(term: UsageTerm, currency: string, period: string): string {
  const each = period.includes(' ') ? `every ${period}` : `each ${period}`;
  const included = term.includedUnits > 0 ? ` after ${count(term.includedUnits)} included ${each}` : `, billed ${each}`;
  return `Plus usage of ${term.meterName}: ${usageRate(term, currency)}${included}`;
}
