/**
 * The price rules that a JSON schema cannot state (they compare fields or need a currency list).
 * Shape, ranges and the provider/pricing-type pairing are in openapi/admin.yaml (PriceCreate);
 * these checks run after it, and again for any caller that is not the HTTP layer.
 */
import { validationError, type ErrorDetails } from '../kernel/errors.js';
import { formatMoney } from '../kernel/money.js';
import type { BillingInterval, PriceProvider, PricingType } from './catalog.repository.js';

/** Crypto checkout settles in these stablecoins only (6 decimals). */
export const CRYPTO_CURRENCIES: ReadonlySet<string> = new Set(['USDC', 'USDT']);

// ICU's ISO 4217 list, read once; `Intl` carries no crypto-asset codes.
const ISO_4217: ReadonlySet<string> = new Set(Intl.supportedValuesOf('currency'));

/** An ISO 4217 code (uppercase), i.e. something the card rail can charge. */
export const isFiatCurrency = (code: string): boolean => ISO_4217.has(code) && !CRYPTO_CURRENCIES.has(code);

/**
 * What one payment may amount to on each rail, in minor units. Card: at least one minor unit and
 * at most Stripe's eight digits (999,999.99 USD, 99,999,999 JPY, 99,999.999 KWD). Crypto: the
 * same ceiling in tokens (999,999.999999 USDC). Both stay below 10^15, so amount / 10^decimals,
 * the orders' display `amount`, has at most 15 significant digits and is exact as a JSON number.
 */
export const AMOUNT_BOUNDS: Readonly<Record<PriceProvider, { min: number; max: number }>> = {
  STRIPE: { min: 1, max: 99_999_999 },
  CRYPTO: { min: 1, max: 999_999_999_999 },
};

const RAIL_NAME: Record<PriceProvider, string> = { STRIPE: 'card checkout', CRYPTO: 'crypto checkout' };

/** Throws 400 VALIDATION_ERROR when `amount` is outside the rail's bounds; `what` names it for the caller. */
export function assertAmountBounds(provider: PriceProvider, currency: string, amount: number, what: string, details?: ErrorDetails): void {
  const { min, max } = AMOUNT_BOUNDS[provider];
  if (Number.isInteger(amount) && amount >= min && amount <= max) return;
  throw validationError(
    `${what} is ${amount} minor units; ${RAIL_NAME[provider]} takes ${min} to ${max} (${formatMoney(min, currency)} to ${formatMoney(max, currency)})`,
    details,
  );
}

export interface PriceRuleInput {
  amount: number;
  currency: string;
  provider: PriceProvider;
  pricingType: PricingType;
  billingInterval: BillingInterval | null;
  billingIntervalCount: number;
  flexibleAmount: boolean;
  minAmount: number | null;
  maxAmount: number | null;
  trialDays?: number | null;
}

/** Throws 400 VALIDATION_ERROR naming the field when a rule is broken. */
export function assertPriceRules(input: PriceRuleInput): void {
  if (input.pricingType === 'SUBSCRIPTION' && input.billingInterval === null) {
    throw validationError('billingInterval is required for SUBSCRIPTION prices', { field: 'billingInterval' });
  }
  if (input.pricingType === 'ONE_TIME' && (input.billingInterval !== null || input.billingIntervalCount !== 1)) {
    throw validationError('billingInterval and billingIntervalCount are only allowed for SUBSCRIPTION prices', { field: 'billingInterval' });
  }
  if (!Number.isInteger(input.billingIntervalCount) || input.billingIntervalCount < 1 || input.billingIntervalCount > 365) {
    throw validationError('billingIntervalCount must be an integer from 1 to 365', { field: 'billingIntervalCount' });
  }
  assertTrialDays(input.pricingType, input.trialDays ?? null, 'trialDays');
  if (input.provider === 'CRYPTO') {
    if (!CRYPTO_CURRENCIES.has(input.currency)) {
      throw validationError(`currency: CRYPTO prices take USDC or USDT, not ${input.currency}`, { field: 'currency' });
    }
    if (input.pricingType !== 'ONE_TIME') {
      throw validationError('pricingType: CRYPTO prices are ONE_TIME only', { field: 'pricingType' });
    }
  } else if (!isFiatCurrency(input.currency)) {
    throw validationError(
      CRYPTO_CURRENCIES.has(input.currency)
        ? `currency: ${input.currency} is crypto checkout's; give provider CRYPTO, or a fiat currency for card (STRIPE) prices`
        : `currency: ${input.currency} is not an ISO 4217 currency code; card (STRIPE) prices take a fiat currency such as USD`,
      { field: 'currency' },
    );
  }
  assertAmountBounds(input.provider, input.currency, input.amount, 'amount', { field: 'amount' });
  for (const field of ['minAmount', 'maxAmount'] as const) {
    const bound = input[field];
    if (bound !== null) assertAmountBounds(input.provider, input.currency, bound, field, { field });
  }
  if (!input.flexibleAmount) {
    if (input.minAmount !== null || input.maxAmount !== null) {
      throw validationError('minAmount and maxAmount are only allowed with flexibleAmount: true', { field: 'minAmount' });
    }
    return;
  }
  if (input.pricingType !== 'ONE_TIME') {
    throw validationError('flexibleAmount: only ONE_TIME prices can let the buyer choose the amount', { field: 'flexibleAmount' });
  }
  if (input.minAmount !== null && input.maxAmount !== null && input.minAmount > input.maxAmount) {
    throw validationError(`minAmount (${input.minAmount}) must not exceed maxAmount (${input.maxAmount})`, { field: 'minAmount' });
  }
  if (input.minAmount !== null && input.amount < input.minAmount) {
    throw validationError(`amount (${input.amount}) is the suggested amount and must not be below minAmount (${input.minAmount})`, { field: 'amount' });
  }
  if (input.maxAmount !== null && input.amount > input.maxAmount) {
    throw validationError(`amount (${input.amount}) is the suggested amount and must not exceed maxAmount (${input.maxAmount})`, { field: 'amount' });
  }
}

/** Stripe's bound for `trial_period_days`, kept on every rail so a price sells the same everywhere. */
export const MAX_TRIAL_DAYS = 730;

/** 400 unless `trialDays` is null or an integer 1-730 on a SUBSCRIPTION price. */
export function assertTrialDays(pricingType: PricingType, trialDays: number | null, field: string): void {
  if (trialDays === null) return;
  if (pricingType !== 'SUBSCRIPTION') throw validationError(`${field}: only SUBSCRIPTION prices have a free trial`, { field });
  if (!Number.isInteger(trialDays) || trialDays < 1 || trialDays > MAX_TRIAL_DAYS) {
    throw validationError(`${field} must be an integer from 1 to ${MAX_TRIAL_DAYS}`, { field });
  }
}
