/** Calendar arithmetic of billing periods, in UTC. */
export type BillingInterval = 'DAY' | 'MONTH' | 'YEAR';

const daysInMonth = (year: number, month: number) => new Date(Date.UTC(year, month + 1, 0)).getUTCDate();

function addMonths(from: Date, months: number): Date {
  const total = from.getUTCMonth() + months;
  const year = from.getUTCFullYear() + Math.floor(total / 12);
  const month = ((total % 12) + 12) % 12;
  const day = Math.min(from.getUTCDate(), daysInMonth(year, month));
  return new Date(Date.UTC(year, month, day, from.getUTCHours(), from.getUTCMinutes(), from.getUTCSeconds(), from.getUTCMilliseconds()));
}

/** `anchor` + n intervals of `count` units; months clamp to the month's last day (Jan 31 + 1 month = Feb 28/29). */
export function addIntervals(anchor: Date, interval: BillingInterval, count: number, n: number): Date {
  switch (interval) {
    case 'DAY':
      return new Date(anchor.getTime() + n * count * 24 * 3600 * 1000);
    case 'MONTH':
      return addMonths(anchor, n * count);
    case 'YEAR':
      return addMonths(anchor, n * count * 12);
  }
}

/** When period `period` of a subscription ends (period 0 starts at the anchor). */
export function periodEnd(s: { billingAnchor: Date; anchorPeriod: number; billingInterval: BillingInterval; billingIntervalCount: number }, period: number): Date {
  return addIntervals(s.billingAnchor, s.billingInterval, s.billingIntervalCount, period - s.anchorPeriod + 1);
}
