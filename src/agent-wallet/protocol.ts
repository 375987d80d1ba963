/**
 * The bytes both sides sign: the request-authentication payload, the wallet authorization
 * payload (RFC 8785 canonical JSON) and the Agent Wallet Key format. Shared by the server and
 * the client in src/client so the two can never disagree.
 */
import canonicalize from 'canonicalize';

/** Allowed distance between X-Agent-Timestamp and the server clock, either direction. */
export const TIMESTAMP_TOLERANCE_SECONDS = 300;

/** Header that binds a wallet authorization signature to an application (Privy's name). */
export const APP_ID_HEADER = 'privy-app-id';

export const SIGN_TYPED_DATA_PATH = '/v1/agent-wallet/sign-typed-data';

/** `METHOD\nROUTE_PATH\nTIMESTAMP` as UTF-8: what X-Agent-Signature signs. */
export function requestPayload(method: string, routePath: string, timestamp: string): Buffer {
  return Buffer.from(`${method.toUpperCase()}\n${routePath}\n${timestamp}`, 'utf8');
}

export interface AuthorizationInput {
  /** Full request URL: the deployment's public API URL + the route path. */
  url: string;
  /** The request body without its `signature` field. */
  body: unknown;
  appId: string;
}

export function authorizationPayload(input: AuthorizationInput) {
  return { version: 1, method: 'POST', url: input.url, body: input.body, headers: { [APP_ID_HEADER]: input.appId } };
}

/** RFC 8785 (JCS) canonical JSON of the authorization payload, as UTF-8 bytes. */
export function authorizationBytes(input: AuthorizationInput): Buffer {
  const text = canonicalize(authorizationPayload(input));
  if (text === undefined) throw new Error('authorization payload is not serializable');
  return Buffer.from(text, 'utf8');
}

/** The Agent Wallet Key: base64 of `{privateKey: <base64 PKCS#8 DER>, walletId}`. */
export interface AgentWalletKey {
  privateKey: string;
  walletId: string | null;
}

export function encodeAgentWalletKey(key: AgentWalletKey): string {
  return Buffer.from(JSON.stringify({ privateKey: key.privateKey, walletId: key.walletId }), 'utf8').toString('base64');
}

export function decodeAgentWalletKey(encoded: string): AgentWalletKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(encoded.trim(), 'base64').toString('utf8'));
  } catch {
    throw new Error('Agent Wallet Key is not base64 of a JSON object');
  }
  const { privateKey, walletId } = (parsed ?? {}) as Record<string, unknown>;
  if (typeof privateKey !== 'string' || !privateKey) throw new Error('Agent Wallet Key has no privateKey');
  if (walletId !== null && walletId !== undefined && typeof walletId !== 'string') throw new Error('Agent Wallet Key has an invalid walletId');
  return { privateKey, walletId: (walletId as string | null | undefined) ?? null };
}
