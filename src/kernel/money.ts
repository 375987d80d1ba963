/**
 * Money is an integer of minor units everywhere; this is the one place that knows how many
 * minor units make a display unit (orders' `amount` field and the hosted page).
 */
const ZERO_DECIMAL = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'JPY', 'KMF', 'KRW', 'MGA', 'PYG', 'RWF', 'UGX', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const THREE_DECIMAL = new Set(['BHD', 'JOD', 'KWD', 'OMR', 'TND']);
/** USDC and USDT: one token = 1,000,000 units (6 decimals on every supported chain). */
export const STABLECOINS = new Set(['USDC', 'USDT']);

export function decimalsOf(currency: string): number {
  const code = currency.toUpperCase();
  if (STABLECOINS.has(code)) return 6;
  if (ZERO_DECIMAL.has(code)) return 0;
  if (THREE_DECIMAL.has(code)) return 3;
  return 2;
}

export function toDisplayAmount(minorUnits: number, currency: string): number {
  return minorUnits / 10 ** decimalsOf(currency);
}

/** `1500, USD` → `USD 15.00` (page text only; never parsed back). */
export function formatMoney(minorUnits: number, currency: string): string {
  const decimals = decimalsOf(currency);
  const whole = Math.trunc(minorUnits / 10 ** decimals);
  const fraction = decimals > 0 ? `.${String(minorUnits % 10 ** decimals).padStart(decimals, '0')}` : '';
  return `${currency.toUpperCase()} ${whole.toLocaleString('en-US')}${fraction}`;
}
