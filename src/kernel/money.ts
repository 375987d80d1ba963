/**
 * Money is an integer of minor units everywhere; this is the one place that knows how many
 * minor units make a display unit (orders' `amount` field, card processors) and the one
 * formatter every surface shows money with: hosted checkout pages, the customer portal,
 * receipts, buyer e-mails, API messages and the browser console (which imports this file;
 * docs/architecture.md, "Money as people read it"). Pure: no dependencies but Intl.
 */
const ZERO_DECIMAL = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'JPY', 'KMF', 'KRW', 'MGA', 'PYG', 'RWF', 'UGX', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const THREE_DECIMAL = new Set(['BHD', 'JOD', 'KWD', 'OMR', 'TND']);
/** USDC and USDT: one token = 1,000,000 units (6 decimals on every supported chain). */
export const STABLECOINS = new Set(['USDC', 'USDT']);

/**
 * The minor-unit exponent Kassa stores a currency with: Stripe's table (its zero- and
 * three-decimal currencies; every other fiat currency two, ISK and HUF included, as Stripe's API
 * takes them), 6 for the stablecoins.
 */
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

interface Symbol {
  /** Written before the number (fiat): `$`, `CA$`, `€`, `CHF ` (with its space). */
  before: string;
  /** Written after the number (stablecoins): ` USDC`. */
  after: string;
}
const SYMBOLS = new Map<string, Symbol>();

/** The currency's en-US symbol as Intl (ICU) knows it, with the space Intl puts after a letter code. */
function symbolOf(code: string): Symbol {
  const known = SYMBOLS.get(code);
  if (known) return known;
  let symbol: Symbol = { before: '', after: ` ${code}` };
  if (!STABLECOINS.has(code)) {
    try {
      const parts = new Intl.NumberFormat('en-US', { style: 'currency', currency: code }).formatToParts(1);
      const at = parts.findIndex((p) => p.type === 'currency');
      const integer = parts.findIndex((p) => p.type === 'integer');
      if (at >= 0 && at < integer) symbol = { before: parts[at]!.value + (integer - at > 1 ? ' ' : ''), after: '' };
    } catch {
      // Not a well-formed code for Intl: written after the number, as the stablecoins are.
    }
  }
  // Codes reach here from stored, validated data; the bound only keeps a stray caller from growing the map.
  if (SYMBOLS.size < 512) SYMBOLS.set(code, symbol);
  return symbol;
}

const group = (digits: string): string => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/** Sign, symbol and number put together: `−` (U+2212) first, then the symbol, then the digits. */
function assemble(negative: boolean, currency: string, whole: string, fraction: string): string {
  const code = currency.toUpperCase();
  const { before, after } = symbolOf(code);
  return `${negative ? '−' : ''}${before}${group(whole.replace(/^0+(?=\d)/, ''))}${fraction ? `.${fraction}` : ''}${after}`;
}

/**
 * The one money format, en-US: the currency's own symbol where it is unambiguous in en-US (`$` is
 * USD only; CA$, A$, €, £, ¥), else its ISO code (`CHF 15.00`, `KWD 1.500`); every ISO decimal
 * shown (JPY none, KWD three); stablecoins after the number, trailing zeros past the cents dropped
 * (`25.00 USDC`, `1.234567 USDT`); a negative amount (a refund, a credit, a discount) `−$5.00`.
 * Integer arithmetic on the digits: a large amount never loses a unit to floating point.
 */
export function formatMoney(minorUnits: number, currency: string): string {
  const decimals = decimalsOf(currency);
  const digits = String(BigInt(Math.abs(Math.trunc(minorUnits)))).padStart(decimals + 1, '0');
  let fraction = digits.slice(digits.length - decimals);
  if (STABLECOINS.has(currency.toUpperCase())) fraction = fraction.replace(/0+$/, '').padEnd(2, '0');
  return assemble(minorUnits < 0, currency, digits.slice(0, digits.length - decimals), fraction);
}

/**
 * A unit price given as an exact decimal of minor units (an order line's `unitAmount`) as money:
 * `"0.004"` USD → `$0.00004`, `"900"` → `$9.00`. The currency's own decimals at least, and beyond
 * them only the digits the price has.
 */
export function formatUnitAmount(minorUnitsDecimal: string, currency: string): string {
  const negative = minorUnitsDecimal.startsWith('-');
  const [whole = '0', fraction = ''] = minorUnitsDecimal.replace(/^[-+]/, '').split('.');
  if (!fraction.replace(/0+$/, '')) return formatMoney(negative ? -Number(whole) : Number(whole), currency);
  const decimals = decimalsOf(currency);
  const scale = fraction.length + decimals;
  const padded = `${whole}${fraction}`.replace(/^0+(?=\d)/, '').padStart(scale + 1, '0');
  const minor = padded.slice(padded.length - scale).replace(/0+$/, '').padEnd(decimals, '0');
  return assemble(negative, currency, padded.slice(0, padded.length - scale), minor);
}
