/**
 * Paying x402 resources with a Kassa agent wallet: an EVM signer in the shape of `@x402/evm`'s
 * `ClientEvmSigner` whose every signature is a `sign-typed-data` request, so the wallet's
 * policies, spend limits and history apply to each payment.
 *
 *   const agent = createAgentClient({ agentWalletKey, baseUrl });
 *   const signer = await createAgentX402Signer(agent);
 *   const client = recordPaymentContext(new x402Client().setSpendControls(false), signer)
 *     .register('eip155:*', new ExactEvmScheme(signer));
 *   const pay = wrapFetchWithPayment(fetch, client);
 *
 * The private key of the wallet never leaves Kassa; the agent holds only its P-256 key.
 */
import { AgentApiError, type AgentClient, type PaymentContext, type TypedData } from './agent.js';

type Hex = `0x${string}`;

/** What `@x402/evm` hands a signer (viem's typed-data shape: integers may be bigint). */
export interface X402TypedDataRequest {
  domain: Record<string, unknown>;
  types: Record<string, unknown>;
  primaryType: string;
  message: Record<string, unknown>;
}

/** Structurally `@x402/evm`'s ClientEvmSigner (address + signTypedData). */
export interface AgentX402Signer {
  readonly address: Hex;
  signTypedData(request: X402TypedDataRequest): Promise<Hex>;
  /**
   * Tells the signer what the next authorization with these terms pays for (the resource URL);
   * `recordPaymentContext` calls it from the x402 client's hook.
   */
  expectPayment(terms: PaymentTerms, context: PaymentContext): void;
}

/** The terms of one x402 payment as the typed data shows them. */
export interface PaymentTerms {
  chainId: number;
  asset: string;
  payTo: string;
  amount: string;
}

/** The wallet refused to sign (policy, spend limit, no wallet): nothing was signed. */
export class X402PaymentRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
  ) {
    super(`Kassa agent wallet refused to sign the x402 payment (${status} ${code}): ${reason}`);
    this.name = 'X402PaymentRefusedError';
  }
}

const termsKey = (t: PaymentTerms) => `${t.chainId}|${t.asset.toLowerCase()}|${t.payTo.toLowerCase()}|${t.amount}`;

/** JSON form of viem typed data: bigint → decimal string, the domain type left out (Kassa derives it). */
function toJson(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(toJson);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toJson(v)]));
  return value;
}

export function typedDataForKassa(request: X402TypedDataRequest): TypedData {
  const { EIP712Domain: _domainType, ...types } = request.types as Record<string, { name: string; type: string }[]>;
  return {
    domain: toJson(request.domain),
    types,
    primary_type: request.primaryType,
    message: toJson(request.message),
  } as TypedData;
}

/** The agent's x402 signer: its address is the assigned wallet's (read once, here). */
export async function createAgentX402Signer(agent: AgentClient): Promise<AgentX402Signer> {
  const identity = await agent.identity();
  if (!identity.walletAddress) throw new X402PaymentRefusedError(400, 'VALIDATION_ERROR', 'No wallet is assigned to this agent');
  const address = identity.walletAddress as Hex;
  // Resource URLs announced by the x402 client's hook, by payment terms (a concurrent payment
  // with other terms cannot take another's URL).
  const expected = new Map<string, PaymentContext[]>();
  return {
    address,
    expectPayment(terms, context) {
      const key = termsKey(terms);
      expected.set(key, [...(expected.get(key) ?? []), context]);
    },
    async signTypedData(request) {
      const typedData = typedDataForKassa(request);
      const domain = typedData.domain as { chainId?: unknown; verifyingContract?: unknown };
      const message = typedData.message as { to?: unknown; value?: unknown };
      const key =
        typeof domain.verifyingContract === 'string' && typeof message.to === 'string'
          ? termsKey({ chainId: Number(domain.chainId), asset: domain.verifyingContract, payTo: message.to, amount: String(message.value) })
          : undefined;
      const waiting = key ? expected.get(key) : undefined;
      const paymentContext = waiting?.shift();
      if (key && waiting && waiting.length === 0) expected.delete(key);
      try {
        const { signature } = await agent.signTypedData(typedData, paymentContext ? { paymentContext } : {});
        return signature as Hex;
      } catch (err) {
        if (err instanceof AgentApiError) throw new X402PaymentRefusedError(err.status, err.code, err.message);
        throw err;
      }
    },
  };
}

/** The part of `@x402/core`'s x402Client this module uses. */
export interface X402ClientHooks {
  onBeforePaymentCreation(
    hook: (context: {
      paymentRequired: { resource?: { url: string } };
      selectedRequirements: { network: string; asset: string; payTo: string; amount: string };
    }) => Promise<void>,
  ): unknown;
}

/**
 * Registers a hook on an x402 client that tells the signer which resource each payment is for,
 * so the wallet's history records the resource URL with the amount, asset, network and payee.
 */
export function recordPaymentContext<C extends X402ClientHooks>(client: C, signer: AgentX402Signer): C {
  client.onBeforePaymentCreation(async ({ paymentRequired, selectedRequirements: r }) => {
    const url = paymentRequired.resource?.url;
    const chain = /^eip155:([0-9]+)$/.exec(r.network);
    if (!url || !chain) return;
    signer.expectPayment({ chainId: Number(chain[1]), asset: r.asset, payTo: r.payTo, amount: r.amount }, { resource_url: url });
  });
  return client;
}
