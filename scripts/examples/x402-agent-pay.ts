/**
 * Agents paying with x402 (docs/x402-agents.md): an agent holding only its Agent Wallet Key pays
 * any x402 resource with the official `@x402/fetch`, Kassa's agent wallet signing each payment
 * (policies, spend limits and history apply to every signature).
 *
 *   KASSA_API_URL=http://localhost:3001 KASSA_AGENT_WALLET_KEY=<printed by `admin agent create`> \
 *     npx tsx scripts/examples/x402-agent-pay.ts https://merchant.example/report
 */
import { pathToFileURL } from 'node:url';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { AgentApiError, createAgentClient, createAgentX402Signer, recordPaymentContext } from '../../src/client/index.js';

export interface X402FetchOptions {
  agentWalletKey: string;
  /** Kassa's platform API (`{api_url}`). */
  apiUrl: string;
  /** How the agent reaches Kassa, and how it reaches the resources (default: global fetch). */
  agentFetch?: (request: Request) => Promise<Response>;
  resourceFetch?: typeof fetch;
  now?: () => number;
}

/** A fetch that pays 402 answers with the agent's Kassa wallet. */
export async function createX402Fetch(options: X402FetchOptions): Promise<typeof fetch> {
  const agent = createAgentClient({
    agentWalletKey: options.agentWalletKey,
    baseUrl: options.apiUrl,
    ...(options.agentFetch ? { fetch: options.agentFetch } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  const signer = await createAgentX402Signer(agent);
  // Kassa's wallet policy is the spending authority; the client's own USD caps would refuse tokens it does not know.
  const client = recordPaymentContext(new x402Client().setSpendControls(false), signer).register('eip155:*', new ExactEvmScheme(signer));
  return wrapFetchWithPayment(options.resourceFetch ?? fetch, client);
}

/**
 * Why a payment did not happen, in one line: the wallet's refusal (policy, spend limit, revoked
 * agent) arrives wrapped by @x402/fetch, so the causes are walked to the Kassa API error.
 */
export function explainFailure(err: unknown): { message: string; status?: number; code?: string } {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof AgentApiError) return { message: `Kassa refused to sign the payment: ${e.message}`, status: e.status, code: e.code };
  }
  return { message: err instanceof Error ? err.message : String(err) };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const agentWalletKey = process.env.KASSA_AGENT_WALLET_KEY;
  const url = process.argv[2];
  if (!agentWalletKey || !url) {
    console.error('usage: KASSA_API_URL=http://localhost:3001 KASSA_AGENT_WALLET_KEY=… npx tsx scripts/examples/x402-agent-pay.ts <resource URL>');
    process.exit(2);
  }
  try {
    const pay = await createX402Fetch({ agentWalletKey, apiUrl: process.env.KASSA_API_URL ?? 'http://localhost:3001' });
    const res = await pay(url);
    const receipt = res.headers.get('PAYMENT-RESPONSE');
    console.log(JSON.stringify({ status: res.status, body: await res.text(), settlement: receipt ? decodePaymentResponseHeader(receipt) : null }));
  } catch (err) {
    // A refusal is an answer, not a crash: one line saying why, exit code 1, no stack trace.
    console.error(JSON.stringify({ step: 'payment refused', ...explainFailure(err) }));
    process.exit(1);
  }
}
