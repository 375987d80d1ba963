/**
 * Order lines in words, for the pages and e-mails a buyer reads (receipt, portal, buyer e-mails):
 * one description, one detail ("3 × $9.00"; "1,234,567 used, 10,000 included: 1,224,567 ×
 * $0.00004"), one signed amount
 * (formatMoney signs it: `−$5.00`), all in the one money format (src/kernel/money.ts). Text only; callers escape it.
 */
import { formatMoney, formatUnitAmount } from '../kernel/money.js';
import type { OrderLine } from './model.js';

const grouped = (decimal: string): string => {
  const [whole, fraction] = decimal.split('.');
  const w = BigInt(whole!).toLocaleString('en-US');
  return fraction ? `${w}.${fraction}` : w;
};

/** What the line's amount is made of, or null when the amount says it all (quantity 1, amount lines). */
export function lineDetail(line: OrderLine, currency: string): string | null {
  // TAX (issue 39): what the rate was applied to; an inclusive line (amount 0) says how much tax the price holds.
  if (line.kind === 'TAX' && line.tax) {
    const t = line.tax;
    if (t.reverseCharge) return t.taxId ? `VAT id ${t.taxId}` : null;
    return t.inclusive ? `${formatMoney(t.taxAmount, currency)} included in ${formatMoney(t.taxableAmount, currency)}` : `${t.percentage}% of ${formatMoney(t.taxableAmount, currency)}`;
  }
  if (line.kind === 'PRICE') return line.quantity && line.quantity !== '1' && line.unitAmount ? `${grouped(line.quantity)} × ${formatUnitAmount(line.unitAmount, currency)}` : null;
  if (line.kind !== 'USAGE' || line.quantity === null) return null;
  const parts = [`${grouped(line.quantity)} used`];
  if (line.includedUnits) parts.push(`${line.includedUnits.toLocaleString('en-US')} included`);
  if (line.creditedUnits) parts.push(`${line.creditedUnits.toLocaleString('en-US')} from credit`);
  const billable = grouped(line.billableQuantity ?? '0');
  const pricing = line.pricing;
  let priced: string;
  if (!pricing) priced = `${billable} billed`;
  else if (pricing.model === 'PER_UNIT') priced = `${billable} × ${formatUnitAmount(pricing.unitAmount, currency)}`;
  else if (pricing.model === 'PACKAGE') priced = `${billable} in packages of ${pricing.packageSize.toLocaleString('en-US')} × ${formatUnitAmount(pricing.packageAmount, currency)}`;
  else priced = `${billable} billed in ${line.tiers?.length ?? 0} ${pricing.model === 'GRADUATED' ? 'graduated' : 'volume'} tier${line.tiers?.length === 1 ? '' : 's'}`;
  return `${parts.join(', ')}: ${priced}`;
}
