/**
 * The coupon and promotion-code forms' field checks (pure): a redemption limit as typed, what the
 * list says of redemptions and expiry. Tested by test/console/discount-fields.test.ts.
 */

export const MAX_REDEMPTIONS = 100_000_000;

/** An optional redemption limit: undefined for empty, a whole number 1–100,000,000, or the sentence that says what is wrong. */
export function parseRedemptionLimit(text: string): { limit: number | undefined } | { problem: string } {
  const cleaned = text.trim().replace(/[\s,_]/g, '');
  if (cleaned === '') return { limit: undefined };
  if (!/^\d+$/.test(cleaned) || Number(cleaned) < 1 || Number(cleaned) > MAX_REDEMPTIONS) return { problem: `Enter a whole number from 1 to ${MAX_REDEMPTIONS.toLocaleString('en-US')}, or leave it empty for no limit.` };
  return { limit: Number(cleaned) };
}

/** Redemptions as the lists show them: `3 of 100`, or `3` without a limit. */
export function redemptionsText(used: number, max: number | null): string {
  return max === null ? `${used}` : `${used} of ${max}`;
}

/** Whether an expiry (ISO) has passed at `now`. */
export function hasExpired(iso: string | null, now: Date): boolean {
  return iso !== null && Date.parse(iso) <= now.getTime();
}
