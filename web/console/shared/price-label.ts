/**
 * How the console names a price wherever one is listed or chosen (the product page, the plan-change
 * picker, payment links, x402 paywalls, the subscription page): its name (`pricingName`, Stripe's
 * price `nickname`), then what it charges — `Monthly — €9.00 / month`, `Yearly — €90.00 / year`.
 * Two prices of one product used to read the same (both named after the product, both "€9.00"):
 * the name is left out only when it is the product's own (the default), the terms always say the
 * amount, the interval, a free trial, usage and credits, and `distinctLabels` adds the price id to
 * any label a list still holds twice. Pure (no DOM, no state): tested by test/console/price-label.test.ts.
 */
import { formatMoney, formatQuantity } from './format.js';

/** The fields of a price (the API's `Price`) a label reads. */
export interface LabeledPrice {
  pricingId: string;
  pricingName: string;
  amount: number;
  currency: string;
  pricingType: 'ONE_TIME' | 'SUBSCRIPTION';
  billingInterval?: 'DAY' | 'MONTH' | 'YEAR' | null;
  billingIntervalCount?: number;
  flexibleAmount?: boolean;
  trialDays?: number;
  meteredComponents?: ReadonlyArray<{ meterId: string }>;
  grantsUnits?: { meterId: string; units: number };
}

export interface PriceLabelOptions {
  /** The price's product: a name equal to it (the default name) is not repeated. */
  productName?: string;
  /** Start with the product's name (pickers across products). */
  withProduct?: boolean;
  /** A subscription's price per seat (`€9.00 per seat / month`). */
  perSeat?: boolean;
  /** A meter's name (usage components, credit packs); its id without it. */
  meterName?: (meterId: string) => string;
}

/** `month`, `3 months`, `day`, `year`. */
export function intervalText(interval: 'DAY' | 'MONTH' | 'YEAR', count = 1): string {
  const unit = interval.toLowerCase();
  return count === 1 ? unit : `${count} ${unit}s`;
}

/** What the price charges: `€9.00 / month`, `€25.00 one-time`, `pay what you want (suggested €20.00)`, with trial, usage and credits. */
export function priceTerms(p: LabeledPrice, options: Pick<PriceLabelOptions, 'perSeat' | 'meterName'> = {}): string {
  const money = formatMoney(p.amount, p.currency);
  const meter = options.meterName ?? ((id: string) => id);
  let text: string;
  if (p.pricingType === 'SUBSCRIPTION' && p.billingInterval) {
    text = `${money}${options.perSeat ? ' per seat' : ''} / ${intervalText(p.billingInterval, p.billingIntervalCount ?? 1)}`;
  } else if (p.flexibleAmount) {
    text = `pay what you want (suggested ${money})`;
  } else {
    text = `${money} one-time`;
  }
  const usage = (p.meteredComponents ?? []).map((c) => meter(c.meterId));
  if (usage.length > 0) text += ` + usage of ${usage.join(', ')}`;
  if (p.grantsUnits) text += `, ${formatQuantity(String(p.grantsUnits.units))} ${meter(p.grantsUnits.meterId)} credits`;
  if (p.trialDays) text += `, ${p.trialDays}-day free trial`;
  return text;
}

/**
 * What a price is called, without its terms: the product (with `withProduct`), then the price's own
 * name unless it is only the product's (the default, in any case): `Pro plan — Yearly`, `Yearly`,
 * `Pro plan`, or `` (the product's own name, the product not asked for).
 */
export function priceName(p: Pick<LabeledPrice, 'pricingName'>, options: Pick<PriceLabelOptions, 'productName' | 'withProduct'> = {}): string {
  const name = p.pricingName.trim();
  const product = options.productName?.trim();
  const sameAsProduct = product !== undefined && name.toLocaleLowerCase('en-US') === product.toLocaleLowerCase('en-US');
  const parts: string[] = [];
  if (options.withProduct && product) parts.push(product);
  if (name && !sameAsProduct) parts.push(name);
  return parts.join(' — ');
}

/** The price's name (`priceName`), then the terms: `Monthly — €9.00 / month`. */
export function priceLabel(p: LabeledPrice, options: PriceLabelOptions = {}): string {
  const name = priceName(p, options);
  return name ? `${name} — ${priceTerms(p, options)}` : priceTerms(p, options);
}

/**
 * Labels as a list shows them, each one different: a label two or more entries share (two prices
 * alike in name and terms) ends in its id, `… (PRC_…)`, so a person can still tell them apart.
 */
export function distinctLabels(entries: ReadonlyArray<{ id: string; label: string }>): Map<string, string> {
  const seen = new Map<string, number>();
  for (const e of entries) seen.set(e.label, (seen.get(e.label) ?? 0) + 1);
  return new Map(entries.map((e) => [e.id, (seen.get(e.label) ?? 0) > 1 ? `${e.label} (${e.id})` : e.label]));
}

/** `priceLabel` for each price of a list, made distinct (`distinctLabels`). */
export function priceLabels(prices: ReadonlyArray<LabeledPrice>, options: PriceLabelOptions | ((p: LabeledPrice) => PriceLabelOptions) = {}): Map<string, string> {
  return distinctLabels(prices.map((p) => ({ id: p.pricingId, label: priceLabel(p, typeof options === 'function' ? options(p) : options) })));
}
