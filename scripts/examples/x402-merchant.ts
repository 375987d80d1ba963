/**
 * Charging agents with x402 (docs/x402-merchants.md): an Express app whose route is priced with
 * the official `@x402/express` middleware, Kassa as its facilitator (`{base_url}/v1/x402`, the
 * organization's API key in X-API-Key). Every settled payment becomes a PAID order in Kassa and
 * an `order.paid` webhook.
 *
 *   KASSA_URL=http://localhost:3000 KASSA_API_KEY=ak_… PAY_TO=0x<receiving wallet> \
 *   NETWORK=eip155:8453 ASSET=0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913 PRICE_UNITS=10000 \
 *     npx tsx scripts/examples/x402-merchant.ts        # serves GET /report on PORT (4021)
 */
import { pathToFileURL } from 'node:url';
import express, { type Express } from 'express';
import { HTTPFacilitatorClient } from '@x402/core/server';
import { ExactEvmScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';

export interface PaidAppOptions {
  /** Kassa's merchant API (`{base_url}`). */
  kassaUrl: string;
  apiKey: string;
  network: `eip155:${number}`;
  /** The organization's receiving wallet on that chain (`admin org set-wallet`). */
  payTo: string;
  /** The stablecoin and its EIP-712 domain (USDC: name "USD Coin", version "2"). */
  asset: { address: string; name: string; version: string };
  /**
   * Priced routes: `GET /path` → token base units. `pricingId` (optional) names the Kassa catalog
   * price the route sells (`extra.kassaPricingId`): the order is then of that price's product and
   * grants its entitlement; `units` must be that price's amount in token units.
   */
  routes: Record<string, { units: bigint; description: string; body: unknown; pricingId?: string }>;
}

export function createPaidApp(options: PaidAppOptions): Express {
  const headers = { 'X-API-Key': options.apiKey };
  const facilitator = new HTTPFacilitatorClient({
    url: `${options.kassaUrl.replace(/\/+$/, '')}/v1/x402`,
    createAuthHeaders: async () => ({ supported: headers, verify: headers, settle: headers }),
  });
  const server = new x402ResourceServer(facilitator).register(options.network, new ExactEvmScheme());
  const app = express();
  const priced = Object.fromEntries(
    Object.entries(options.routes).map(([route, r]) => [
      route,
      {
        accepts: {
          scheme: 'exact',
          network: options.network,
          payTo: options.payTo,
          price: { asset: options.asset.address, amount: r.units.toString(), extra: { name: options.asset.name, version: options.asset.version, ...(r.pricingId ? { kassaPricingId: r.pricingId } : {}) } },
          maxTimeoutSeconds: 120,
        },
        description: r.description,
      },
    ]),
  );
  app.use(paymentMiddleware(priced, server));
  for (const [route, r] of Object.entries(options.routes)) {
    app.get(route.replace(/^GET /, ''), (_req, res) => {
      res.json(r.body);
    });
  }
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = (name: string) => {
    const value = process.env[name];
    if (!value) throw new Error(`set ${name}`);
    return value;
  };
  const app = createPaidApp({
    kassaUrl: process.env.KASSA_URL ?? 'http://localhost:3000',
    apiKey: env('KASSA_API_KEY'),
    network: env('NETWORK') as `eip155:${number}`,
    payTo: env('PAY_TO'),
    asset: { address: env('ASSET'), name: process.env.ASSET_NAME ?? 'USD Coin', version: process.env.ASSET_VERSION ?? '2' },
    routes: { 'GET /report': { units: BigInt(process.env.PRICE_UNITS ?? '10000'), description: 'Weather report', body: { report: 'sunny' } } },
  });
  const port = Number(process.env.PORT ?? 4021);
  app.listen(port, () => console.log(JSON.stringify({ listening: `http://localhost:${port}/report` })));
}
