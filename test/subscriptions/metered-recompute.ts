/**
 * The independent recomputation of metered lines the plan-change tests hold Kassa to (BigInt;
 * amounts in 10^-12 of the minor unit): written from the rule, not from Kassa's pricing.
 */
export type Pricing = { model: 'PER_UNIT'; unitAmountDecimal: string } | { model: 'GRADUATED'; tiers: Array<{ upTo: number | null; unitAmountDecimal: string; flatAmountCents?: number }> };

const SCALE = 10n ** 12n;
export const fixed = (text: string): bigint => {
  const [w, f = ''] = text.split('.');
  return BigInt(w!) * SCALE + BigInt((f + '0'.repeat(12)).slice(0, 12));
};
export const halfUp = (n: bigint, d: bigint): number => Number((2n * n + d) / (2n * d));
export function usageCents(quantity: bigint, included: bigint, pricing: Pricing): number {
  const billable = quantity > included ? quantity - included : 0n;
  let exact = 0n;
  if (pricing.model === 'PER_UNIT') exact = billable * fixed(pricing.unitAmountDecimal);
  else {
    let lower = 0n;
    for (const t of pricing.tiers) {
      const upper = t.upTo === null ? billable : BigInt(t.upTo);
      const inTier = (billable < upper ? billable : upper) - lower;
      if (inTier > 0n) exact += inTier * fixed(t.unitAmountDecimal) + BigInt(t.flatAmountCents ?? 0) * SCALE;
      if (t.upTo === null || billable <= upper) break;
      lower = upper;
    }
  }
  return halfUp(exact, SCALE);
}
/** A day as pages, e-mails and line descriptions print it (UTC). */
export const day = (iso: string) => new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' }).format(new Date(iso));
