/**
 * Charging agents without code (docs/x402-merchants.md, "Paywalls without code"): a catalog price
 * becomes an x402 resource served by Kassa at `{base_url}/x402/prices/{id}`; any x402 client (an
 * agent with @x402/fetch, see x402-agent-pay.ts) pays it there and gets a signed receipt, or a
 * redirect to `contentUrl`.
 *
 *   KASSA_URL=http://localhost:3000 KASSA_API_KEY=<merchant key with x402:settle> \
 *     npx tsx scripts/examples/x402-paywall.ts PRC_… [https://shop.example/content]
 */
import { pathToFileURL } from 'node:url';
import { createMerchantClient, type X402Paywall } from '../../src/client/merchant.js';
import { verifyX402Receipt, type SigningKeyResponse, type X402Receipt } from '../../src/client/verify-webhook.js';

export interface PaywallOptions {
  /** Kassa's merchant API (`{base_url}`). */
  kassaUrl: string;
  apiKey: string;
  pricingId: string;
  /** Where paid requests are redirected; omitted: Kassa answers with a signed receipt. */
  contentUrl?: string;
}

/** Turns the paywall on (again: changes its contentUrl) with the SDK; returns `{ pricingId, url, contentUrl, … }`. */
export async function enablePaywall(options: PaywallOptions): Promise<X402Paywall> {
  const kassa = createMerchantClient({ baseUrl: options.kassaUrl, apiKey: options.apiKey });
  return kassa.putX402Paywall(options.pricingId, options.contentUrl ? { contentUrl: options.contentUrl } : {});
}

export type PaywallReceipt = X402Receipt;

/**
 * Checks a paywall's 200 answer against `GET {api_url}/v1/webhooks/signing-key` with the SDK's
 * verifyX402Receipt: the receipt is signed with the webhook key but for another purpose, so it
 * never passes as a webhook delivery (nor a delivery as a receipt). A receipt shown later (not at
 * once) needs a wider `toleranceSeconds`.
 */
export async function verifyReceipt(res: Response, signingKeys: SigningKeyResponse, options: { now?: Date; toleranceSeconds?: number } = {}): Promise<PaywallReceipt> {
  const rawBody = Buffer.from(await res.arrayBuffer());
  return verifyX402Receipt(rawBody, res.headers, signingKeys, options);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [pricingId, contentUrl] = process.argv.slice(2);
  const apiKey = process.env.KASSA_API_KEY;
  if (!pricingId || !apiKey) throw new Error('usage: KASSA_API_KEY=… npx tsx scripts/examples/x402-paywall.ts <pricingId> [contentUrl]');
  const paywall = await enablePaywall({ kassaUrl: process.env.KASSA_URL ?? 'http://localhost:3000', apiKey, pricingId, ...(contentUrl ? { contentUrl } : {}) });
  console.log(JSON.stringify(paywall));
}
