/**
 * Order lines in words, for the pages and e-mails a buyer reads (receipt, portal, buyer e-mails):
 * one description, one detail ("3 × USD 9.00"; "1,234,567 used, 10,000 included: 1,224,567 ×
 * USD 0.00004"), one signed amount. Text only; callers escape it.
 */
import { decimalsOf, formatMoney } from '../kernel/money.js';
import type { OrderLine } from './model.js';

const grouped = (decimal: string): string => {
  const [whole, fraction] = decimal.split('.');
  const w = BigInt(whole!).toLocaleString('en-US');
  return fraction ? `${w}.${fraction}` : w;
};

/** A decimal of minor units as money: `"0.004"` USD → `USD 0.00004`, `"900"` → `USD 9.00`. */
export function formatUnitAmount(minorUnits: string, currency: string): string {
  const decimals = decimalsOf(currency);
  const [whole = '0', fraction = ''] = minorUnits.split('.');
  const digits = `${whole}${fraction}`.replace(/^0+(?=\d)/, '');
  const scale = fraction.length + decimals;
  const padded = digits.padStart(scale + 1, '0');
  let major = padded.slice(0, padded.length - scale);
  let minor = scale > 0 ? padded.slice(padded.length - scale) : '';
  // At least the currency's own decimals; beyond them only what the price needs.
  minor = minor.replace(/0+$/, '').padEnd(decimals, '0');
  major = BigInt(major).toLocaleString('en-US');
  return `${currency.toUpperCase()} ${major}${minor ? `.${minor}` : ''}`;
}

/** A signed amount: credits and discounts read `−USD 5.00`. */
export function formatLineAmount(amount: number, currency: string): string {
  return amount < 0 ? `−${formatMoney(-amount, currency)}` : formatMoney(amount, currency);
}

/** What the line's amount is made of, or null when the amount says it all (quantity 1, amount lines). */
export function lineDetail(line: OrderLine, currency: string): string | null {
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
