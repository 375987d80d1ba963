/**
 * The hosted pages' framework: one layout (server-rendered HTML, one inline stylesheet, no script,
 * no external asset, so it works on any phone under a strict Content-Security-Policy), the
 * headers every page carries, and the pages every route shares (not found, try again, errors).
 */
import type { Request, Response } from 'express';
import { AppError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { statusOf, toAppError } from '../http/errors.js';
import { contrastRatio, textColourOn } from '../kernel/colour.js';

export interface Page {
  status: number;
  html: string;
  /** Headers besides the page headers (Retry-After). */
  headers?: Record<string, string>;
}

/** Whom the buyer pays: the organization's display name on its hosted pages. */
export interface MerchantNames {
  /** Undefined for an unknown organization. */
  displayNameOf(orgId: string): Promise<string | undefined>;
  /** The display name with the organization's branding (logo, accent colour); undefined for an unknown organization. */
  brandedOf?(orgId: string): Promise<BrandedMerchant | undefined>;
}

/** An organization's branding: an https logo URL and an accent colour `#rrggbb`, each optional. */
export interface Brand {
  logoUrl: string | null;
  accentColor: string | null;
}

/** A merchant's line on a page: its name, and its branding when it has one. */
export interface BrandedMerchant {
  name: string;
  brand: Brand;
}

/** What a page says of its merchant: a name, or a name with its branding. */
export type PageMerchant = string | BrandedMerchant;

/** The merchant line of a page: branded when the organization service offers it. */
export const pageMerchantOf = (merchants: MerchantNames, orgId: string): Promise<PageMerchant | undefined> =>
  merchants.brandedOf ? merchants.brandedOf(orgId) : merchants.displayNameOf(orgId);

export const merchantName = (merchant: PageMerchant | undefined): string | undefined => (typeof merchant === 'string' ? merchant : merchant?.name);

/**
 * The branding's styles: the accent on buttons (text black or white by WCAG contrast), and on the
 * merchant line and links only where it keeps 4.5:1 on the white card (else the default ink).
 */
function brandStyle(brand: Brand | undefined): string {
  const accent = brand?.accentColor;
  if (!accent || !/^#[0-9a-f]{6}$/.test(accent)) return '';
  const text = textColourOn(accent);
  const ink = contrastRatio(accent, '#ffffff') >= 4.5 ? accent : '#1d2330';
  return `<style>button:not(.secondary):not(.danger):not(.link){background:${accent};color:${text}}button:not(.secondary):not(.danger):not(.link):hover{background:${accent};filter:brightness(.92)}.brand,a,button.link{color:${ink}}.secondary{color:${ink};border-color:${ink}}</style>`;
}

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** No script at all; styles only inline; forms post to us; never framed. */
export const HOSTED_PAGE_CSP =
  "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data: https:; form-action 'self' https:; frame-ancestors 'none'; base-uri 'none'";

/** The headers of every hosted page. */
export const HOSTED_PAGE_HEADERS = { 'Content-Security-Policy': HOSTED_PAGE_CSP, 'X-Frame-Options': 'DENY', 'Referrer-Policy': 'no-referrer', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };

// An amount never wraps: when the total row is too narrow (the largest amounts on a 360 px phone)
// it moves below its label. Long unbroken names wrap anywhere rather than widen the page.
const STYLE = `
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}
main{max-width:440px;margin:0 auto;padding:24px 16px}
.card{background:#fff;border-radius:14px;box-shadow:0 1px 3px rgba(16,24,40,.1),0 8px 24px rgba(16,24,40,.06);padding:24px}
.brand{font-weight:700;letter-spacing:.02em;color:#4338ca;margin-bottom:16px}
.lines{width:100%;border-collapse:collapse;margin:16px 0 0;font-size:.9rem}.lines th,.lines td{text-align:left;padding:6px 0;border-top:1px solid #eaecf0;vertical-align:top}.lines th{color:#667085;font-weight:normal}.lines .num{text-align:right;white-space:nowrap;padding-left:12px}
.receipt{display:grid;grid-template-columns:auto 1fr;gap:4px 12px;margin:16px 0 0;font-size:.9rem}.receipt dt{color:#667085}.receipt dd{margin:0;min-width:0}
h1{font-size:1.25rem;margin:0 0 4px}.muted{color:#667085;font-size:.9rem} .usage-terms{margin:6px 0 0;padding-left:18px}
.card,footer{overflow-wrap:anywhere}
.total{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:baseline;column-gap:12px;border-top:1px solid #eaecf0;margin-top:16px;padding-top:16px}
.total>span{flex:none}.total strong{font-size:1.5rem}
.total .amount{white-space:nowrap;margin-left:auto;font-size:clamp(1.125rem,5.5vw,1.5rem)}
label{display:block;font-size:.85rem;font-weight:600;margin:14px 0 6px}
input,select{width:100%;font:inherit;padding:12px;border:1px solid #d0d5dd;border-radius:10px;background:#fff}
input:focus,select:focus{outline:2px solid #6366f1;border-color:#6366f1}
.row{display:flex;gap:12px}.row>div{flex:1}
.tax-lines{margin-top:12px}.tax-lines .line{display:flex;justify-content:space-between;gap:12px;color:#475467}
button{width:100%;margin-top:20px;padding:14px;font:inherit;font-weight:700;color:#fff;background:#4338ca;border:0;border-radius:10px;cursor:pointer}
button:hover{background:#3730a3}
a.button{display:block;text-align:center;margin-top:12px;padding:13px;font-weight:700;border-radius:10px;text-decoration:none}
a.primary{background:#4338ca;color:#fff}a.primary:hover{background:#3730a3}
.secondary{background:#fff;color:#3730a3;border:1px solid #a5b4fc}a.secondary:hover,button.secondary:hover{background:#eef2ff}
button.danger{background:#b42318}button.danger:hover{background:#912018}
input[type=submit]{font-weight:700;cursor:pointer}input.secondary:hover{background:#eef2ff}.promotion-code .row{align-items:flex-end}.promotion-code .row>div:last-child{flex:0 0 auto}
button.link{width:auto;margin:0;padding:0;background:none;color:#4338ca;font-weight:600;text-decoration:underline}
h2{font-size:1.05rem;margin:24px 0 8px}h3{font-size:1rem;margin:0 0 2px}
.items{list-style:none;margin:0;padding:0}.item{border-top:1px solid #eaecf0;padding:12px 0}.item form button,.item a.button{margin-top:10px}
fieldset{border:1px solid #d0d5dd;border-radius:10px;margin:16px 0 0;padding:4px 14px 8px;min-width:0}legend{font-size:.85rem;font-weight:600;padding:0 4px}
label.choice{display:flex;align-items:baseline;gap:10px;font-size:1rem;font-weight:normal;margin:10px 0;cursor:pointer}label.choice input{width:auto;flex:none;margin:0;padding:0}label.choice .muted{display:block}
input[type=radio]:focus-visible{outline:3px solid #6366f1;outline-offset:2px}.lines tfoot th,.lines tfoot td{color:inherit;font-weight:700}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
@media print{body{background:#fff}.card{box-shadow:none}.noprint,footer{display:none}}
a:focus-visible,button:focus-visible{outline:3px solid #6366f1;outline-offset:2px}
.error{background:#fef3f2;color:#b42318;border:1px solid #fecdca;border-radius:10px;padding:10px 12px;margin-top:16px}
.ok{background:#ecfdf3;color:#067647;border:1px solid #abefc6;border-radius:10px;padding:10px 12px;margin-top:16px}
.note{margin-top:16px;font-size:.8rem;color:#667085}.note code{background:#f2f4f7;padding:1px 4px;border-radius:4px}
a{color:#4338ca}footer{text-align:center;margin-top:16px;font-size:.8rem;color:#5b6474}
`;

export interface LayoutOptions {
  refreshSeconds?: number;
  refreshUrl?: string;
  /** The organization's display name (and branding), the page's heading line; pages that know no merchant say "Kassa". */
  merchant?: PageMerchant;
  /** The rail the page's checkout is paid on, named in the footer; pages that take no payment name none. */
  rail?: PageRail;
}

/** The rails a hosted page may name: Kassa's sandbox card page, Stripe Checkout, a crypto transfer. */
export type PageRail = 'sandbox' | 'stripe' | 'crypto';

/** The footer's words: "Secured by Kassa", with the checkout's rail ("sandbox" only on the sandbox's). */
export function footerText(rail: PageRail | undefined): string {
  switch (rail) {
    case 'sandbox':
      return 'Secured by Kassa · sandbox';
    case 'stripe':
      return 'Secured by Kassa · card payment by Stripe';
    case 'crypto':
      return 'Secured by Kassa · crypto payment';
    default:
      return 'Secured by Kassa';
  }
}

export function layout(title: string, body: string, options: LayoutOptions = {}): string {
  const target = options.refreshUrl ? `;url=${escapeHtml(options.refreshUrl)}` : '';
  const name = merchantName(options.merchant);
  const branding = typeof options.merchant === 'object' ? options.merchant.brand : undefined;
  // The logo is decorative next to the name (alt=""), at most 40 px high.
  const logo = branding?.logoUrl?.startsWith('https://')
    ? `<img src="${escapeHtml(branding.logoUrl)}" alt="" data-testid="merchant-logo" style="display:block;max-height:40px;max-width:160px;margin-bottom:8px">`
    : '';
  const brand = name ? `${logo}<div class="brand" data-testid="merchant">${escapeHtml(name)}</div>` : '<div class="brand">Kassa</div>';
  const refresh = options.refreshSeconds ? `<meta http-equiv="refresh" content="${options.refreshSeconds}${target}">` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">${refresh}<title>${escapeHtml(title)}</title><style>${STYLE}</style>${brandStyle(branding)}</head><body><main><div class="card">${brand}${body}</div><footer>${escapeHtml(footerText(options.rail))}</footer></main></body></html>`;
}

export function sendPage(res: Response, page: Page): void {
  res.status(page.status).set(HOSTED_PAGE_HEADERS).set(page.headers ?? {}).type('html').send(page.html);
}

export const messagePage = (status: number, title: string, message: string, merchant?: PageMerchant): Page => ({
  status,
  html: layout(title, `<h1>${escapeHtml(title)}</h1><div class="error" role="alert" data-testid="status">${escapeHtml(message)}</div>`, { merchant }),
});

export const notFoundPage = (message = 'This page does not exist. Check the link you were given.', merchant?: PageMerchant): Page => messagePage(404, 'Not found', message, merchant);

const waitText = (seconds: number) => (seconds > 90 ? `about ${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`);

/**
 * A 429 (too many requests from this client) or 503 (no exact amount free, database unreachable)
 * as a page a buyer understands, keeping the status and Retry-After; undefined for other errors.
 */
export function retryLaterPage(err: unknown, merchant?: PageMerchant): Page | undefined {
  const { error } = toAppError(err);
  if (statusOf(error) !== 429 && statusOf(error) !== 503) return undefined;
  const retryAfter = error.options.headers?.['Retry-After'] ?? '30';
  const wait = waitText(Number(retryAfter));
  if (statusOf(error) === 429) {
    return { status: 429, headers: { 'Retry-After': retryAfter }, html: layout('Too many requests', `<h1>Too many requests</h1><div class="error" data-testid="status">Too many requests came from your network. Please try again in ${escapeHtml(wait)}.</div>`, { merchant }) };
  }
  const title = Number(retryAfter) > 300 ? 'Try again later' : 'Try again shortly';
  return { status: 503, headers: { 'Retry-After': retryAfter }, html: layout(title, `<h1>${title}</h1><div class="error" data-testid="status">This checkout is busy right now. Please try again in ${escapeHtml(wait)}.</div>`, { merchant }) };
}

/**
 * What a page route answers when it throws: a try-again page (429, 503), the refusal's message
 * (404, or 400 for any other client error), or a logged 500 page for a failure of ours; under
 * the merchant's name when the route knows it.
 */
export function pageFailure(logger: Logger, title = 'Cannot open this checkout') {
  return (req: Request, res: Response, err: unknown, merchant?: PageMerchant): void => {
    const retry = retryLaterPage(err, merchant);
    if (retry) {
      (req.log ?? logger).warn({ err }, 'hosted page unavailable');
      return sendPage(res, retry);
    }
    if (err instanceof AppError && statusOf(err) < 500) {
      return sendPage(res, statusOf(err) === 404 ? notFoundPage(err.message, merchant) : messagePage(400, title, err.message, merchant));
    }
    (req.log ?? logger).error({ err }, 'hosted page failed');
    sendPage(res, messagePage(500, 'Something went wrong', 'Please try again in a moment.', merchant));
  };
}
