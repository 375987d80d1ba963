/**
 * Agent wallet client: loads an Agent Wallet Key, signs every request's X-Agent-* headers,
 * builds the wallet authorization signature of sign-typed-data, and calls every route of
 * openapi/agent-wallet.yaml through openapi-fetch (typed from generated/agent-wallet.ts).
 *
 *   const agent = createAgentClient({ agentWalletKey: process.env.AGENT_WALLET_KEY!, baseUrl: 'https://api.example.com' });
 *   const { signature } = await agent.signTypedData(typedData);
 *
 * The private key stays in this process: only the public key and signatures are sent.
 */
import { createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto';
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from '../../generated/agent-wallet.js';
import {
  authorizationBytes,
  decodeAgentWalletKey,
  requestPayload,
  SIGN_TYPED_DATA_PATH,
  type AuthorizationInput,
} from '../agent-wallet/protocol.js';

export type AgentIdentity = components['schemas']['AgentIdentity'];
export type AgentPolicy = components['schemas']['Policy'];
export type AgentHistoryEntry = components['schemas']['HistoryEntry'];
export type TypedData = components['schemas']['TypedData'];
export type SignTypedDataResult = components['schemas']['SignTypedDataResponse']['data'];
export type CreditBalance = components['schemas']['CreditBalanceResponse']['data'];
export type PaymentContext = NonNullable<components['schemas']['SignTypedDataRequest']['payment_context']>;

/** An error answer of the API: HTTP status plus the envelope's code and message. */
export class AgentApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'AgentApiError';
  }
}

export interface AgentClientOptions {
  /** The Agent Wallet Key as printed by `agent create`: base64 of `{privateKey, walletId}`. */
  agentWalletKey: string;
  /** The API's public base URL (`{api_url}`), without a trailing slash. */
  baseUrl: string;
  /** Custom fetch (tests, proxies). */
  fetch?: (request: Request) => Promise<Response>;
  /** Current time in milliseconds; defaults to the system clock. */
  now?: () => number;
}

export interface AgentClient {
  /** Standard base64 DER SPKI of the agent's public key (the X-Agent-Pubkey value). */
  readonly publicKey: string;
  /** The wallet recorded in the Agent Wallet Key at issuance (the server's assignment may differ). */
  readonly walletId: string | null;
  /** The underlying typed openapi-fetch client (requests through it are signed too). */
  readonly http: Client<paths>;
  identity(): Promise<AgentIdentity>;
  policies(): Promise<AgentPolicy[]>;
  history(options?: { limit?: number }): Promise<AgentHistoryEntry[]>;
  creditBalance(): Promise<CreditBalance>;
  /**
   * Signs EIP-712 typed data with the assigned wallet (uint256 values as decimal strings).
   * `paymentContext` says what the signature pays for (recorded in the wallet's history).
   */
  signTypedData(typedData: TypedData, options?: { paymentContext?: PaymentContext }): Promise<SignTypedDataResult>;
  /** The `signature` field of a sign-typed-data body: P-256 over the RFC 8785 payload. */
  authorizationSignature(body: { typed_data: TypedData; payment_context?: PaymentContext }, appId: string): string;
}

type FetchResult<T> = { data?: T; error?: unknown; response: Response };

async function unwrap<T extends { data: unknown }>(request: Promise<FetchResult<T>>): Promise<T['data']> {
  const { data, error, response } = await request;
  if (response.ok && data !== undefined) return data.data;
  const envelope = error as { error?: { code?: string; message?: string } } | undefined;
  throw new AgentApiError(
    response.status,
    envelope?.error?.code ?? 'UNKNOWN',
    envelope?.error?.message ?? `HTTP ${response.status} from the agent wallet API`,
  );
}

/** The three X-Agent-* headers of one request. */
export interface AgentRequestHeaders {
  'X-Agent-Pubkey': string;
  'X-Agent-Timestamp': string;
  'X-Agent-Signature': string;
}

/** An agent's P-256 key pair as the signing helpers take it. */
export interface AgentKey {
  /** The PKCS#8 private key, as a KeyObject (it never leaves this process). */
  privateKey: KeyObject;
  /** Standard base64 DER SPKI of the public key (the X-Agent-Pubkey value). */
  publicKey: string;
}

/** Loads an Agent Wallet Key: the P-256 key pair and the wallet recorded at issuance. */
export function loadAgentWalletKey(agentWalletKey: string): AgentKey & { walletId: string | null } {
  const key = decodeAgentWalletKey(agentWalletKey);
  const privateKey = createPrivateKey({ key: Buffer.from(key.privateKey, 'base64'), format: 'der', type: 'pkcs8' });
  if (privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new Error('Agent Wallet Key is not a P-256 key');
  const publicKey = createPublicKey(privateKey).export({ type: 'spki', format: 'der' }).toString('base64');
  return { privateKey, publicKey, walletId: key.walletId };
}

/**
 * Signs one request: P-256 (DER, base64) over `METHOD\nROUTE_PATH\nTIMESTAMP`, where ROUTE_PATH is
 * the route as registered (`/v1/agent-wallet/history`, never the query string) and the timestamp
 * is Unix time in whole seconds.
 */
export function signAgentRequest(key: AgentKey, method: string, routePath: string, timestampSeconds: number): AgentRequestHeaders {
  const timestamp = String(timestampSeconds);
  return {
    'X-Agent-Pubkey': key.publicKey,
    'X-Agent-Timestamp': timestamp,
    'X-Agent-Signature': sign('sha256', requestPayload(method, routePath, timestamp), key.privateKey).toString('base64'),
  };
}

/**
 * The wallet authorization signature (the `signature` field of a sign-typed-data body): P-256
 * (DER, base64) over the RFC 8785 canonical JSON of `{version, method, url, body, headers}`.
 * `url` is the full public URL of the route, `body` the request body without `signature`.
 */
export function signWalletAuthorization(privateKey: KeyObject, input: AuthorizationInput): string {
  return sign('sha256', authorizationBytes(input), privateKey).toString('base64');
}

export function createAgentClient(options: AgentClientOptions): AgentClient {
  const key = loadAgentWalletKey(options.agentWalletKey);
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const now = options.now ?? Date.now;

  const http = createClient<paths>({ baseUrl, ...(options.fetch ? { fetch: options.fetch } : {}) });
  http.use({
    onRequest: ({ request, schemaPath }) => {
      // Signed over the registered route path (schemaPath), never the query string.
      for (const [name, value] of Object.entries(signAgentRequest(key, request.method, schemaPath, Math.floor(now() / 1000)))) {
        request.headers.set(name, value);
      }
      return request;
    },
  });

  let appId: string | undefined;
  const identity = async () => {
    const data = await unwrap(http.GET('/v1/agent-wallet'));
    appId = data.appId;
    return data;
  };
  const authorizationSignature = (body: { typed_data: TypedData; payment_context?: PaymentContext }, forAppId: string) =>
    signWalletAuthorization(key.privateKey, { url: `${baseUrl}${SIGN_TYPED_DATA_PATH}`, body, appId: forAppId });

  return {
    publicKey: key.publicKey,
    walletId: key.walletId,
    http,
    identity,
    policies: () => unwrap(http.GET('/v1/agent-wallet/policies')),
    history: (opts = {}) =>
      unwrap(http.GET('/v1/agent-wallet/history', { params: { query: opts.limit === undefined ? {} : { limit: opts.limit } } })),
    creditBalance: () => unwrap(http.GET('/v1/agent-wallet/credit-balance')),
    authorizationSignature,
    signTypedData: async (typedData, opts = {}) => {
      if (appId === undefined) await identity();
      const body = { typed_data: typedData, ...(opts.paymentContext ? { payment_context: opts.paymentContext } : {}) };
      return unwrap(http.POST('/v1/agent-wallet/sign-typed-data', { body: { ...body, signature: authorizationSignature(body, appId!) } }));
    },
  };
}
