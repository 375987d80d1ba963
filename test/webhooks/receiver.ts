/**
 * A real HTTPS webhook receiver on 127.0.0.1 for tests. It verifies every delivery with node:crypto
 * alone (not with src/client/verify-webhook.ts), so a bug in our verifier cannot hide a bug in our
 * signer. The certificate in fixtures/ is a self-signed, test-only pair (CN kassa-test-receiver,
 * SAN 127.0.0.1, localhost, receiver.kassa.test); the delivery worker under test trusts it via its
 * `ca` option.
 */
import { createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
export const RECEIVER_CERT = readFileSync(path.join(fixtures, 'receiver-cert.pem'));
const RECEIVER_KEY = readFileSync(path.join(fixtures, 'receiver-key.pem'));

export interface Received {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  rawBody: Buffer;
  json: any;
  /** The TLS server name (SNI) the client sent, or false. */
  servername?: string | false | null;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Wait this long (real time) before answering: a slow receiver. */
  delayMs?: number;
}

export interface Receiver {
  url: (pathname?: string) => string;
  port: number;
  received: Received[];
  /** What to answer to the n-th request (0-based); default 200. */
  respond: (request: Received, index: number) => Reply;
  /** Largest number of requests for one webhook-id (to one path) in progress at the same moment. */
  maxConcurrentPerId: () => number;
  /** TLS connections accepted (handshakes completed) so far. */
  tlsConnections: () => number;
  /**
   * Asked when a request starts, with its 0-based position on its connection: true closes the
   * connection at once, before reading the request or answering (a server closing a keep-alive
   * connection just as the client reuses it). Default: never.
   */
  hangUp: (requestOnConnection: number) => boolean;
  /** Closes every connection the receiver holds (idle keep-alive ones included). */
  closeConnections(): void;
  /** Forgets received requests, the reply rule, the hang-up rule, the connection count and the concurrency high-water mark. */
  reset(): void;
  close(): Promise<void>;
}

/** `host`: the address to listen on (default 127.0.0.1); `port`: a fixed port (default: a free one). */
export async function startReceiver(options: { host?: string; port?: number } = {}): Promise<Receiver> {
  const inFlight = new Map<string, number>();
  let maxConcurrent = 0;
  let connections = 0;
  const requestsOnSocket = new WeakMap<object, number>();
  const receiver: Receiver = {
    url: () => '',
    port: 0,
    received: [],
    respond: () => ({ status: 200, body: 'ok' }),
    maxConcurrentPerId: () => maxConcurrent,
    tlsConnections: () => connections,
    hangUp: () => false,
    closeConnections: () => server.closeAllConnections(),
    reset: () => {
      receiver.received.length = 0;
      receiver.respond = () => ({ status: 200, body: 'ok' });
      receiver.hangUp = () => false;
      maxConcurrent = 0;
      connections = 0;
    },
    close: async () => {},
  };
  const server = https.createServer({ cert: RECEIVER_CERT, key: RECEIVER_KEY }, (req, res) => {
    const position = requestsOnSocket.get(req.socket) ?? 0;
    requestsOnSocket.set(req.socket, position + 1);
    if (receiver.hangUp(position)) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      let json: unknown;
      try {
        json = JSON.parse(rawBody.toString('utf8'));
      } catch {
        json = undefined;
      }
      const request: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, rawBody, json, servername: (req.socket as TLSSocket).servername };
      const index = receiver.received.length;
      receiver.received.push(request);
      // One endpoint's delivery of one event; the same event may legitimately reach two endpoints at once.
      const id = `${String(req.headers['webhook-id'])} ${req.url}`;
      const now = (inFlight.get(id) ?? 0) + 1;
      inFlight.set(id, now);
      maxConcurrent = Math.max(maxConcurrent, now);
      const reply = receiver.respond(request, index);
      const answer = () => {
        inFlight.set(id, (inFlight.get(id) ?? 1) - 1);
        if (res.destroyed) return;
        res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(answer, reply.delayMs);
      else answer();
    });
  });
  server.on('secureConnection', () => connections++);
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  receiver.port = port;
  receiver.url = (pathname = '/hooks/kassa') => `https://${options.host ?? '127.0.0.1'}:${port}${pathname}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}

export interface Jwk {
  kid: string;
  x: string;
  kty: string;
  crv: string;
}

/**
 * Independent Standard Webhooks check with node:crypto: which published keys verify which
 * `v1a` entries of the signature header. Returns the verifying key ids.
 */
export function verifyWithNodeCrypto(request: Received, keys: Jwk[]): string[] {
  const id = String(request.headers['webhook-id']);
  const timestamp = String(request.headers['webhook-timestamp']);
  const message = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), request.rawBody]);
  const entries = String(request.headers['webhook-signature']).split(' ');
  const verified = new Set<string>();
  for (const entry of entries) {
    const [version, signature] = entry.split(',');
    if (version !== 'v1a' || !signature) continue;
    for (const jwk of keys) {
      const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
      if (verify(null, message, key, Buffer.from(signature, 'base64'))) verified.add(jwk.kid);
    }
  }
  return [...verified];
}
