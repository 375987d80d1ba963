/**
 * Keep-alive connections to webhook receivers that keep the SSRF guarantee.
 *
 * A fresh TLS connection per attempt costs a full handshake on both sides, more CPU than the
 * delivery itself (docs/benchmarks.md). So connections are kept alive and reused, but only in a
 * way that preserves "the address checked is the address connected to":
 *
 * - a *route* is one checked resolution of a receiver's host: the guard resolves the name and
 *   checks every address (`UrlGuard.resolveChecked`), exactly as at registration;
 * - each route has its own keep-alive `https.Agent` whose sockets get the route's addresses from a
 *   pinned `lookup` (no second, unchecked DNS answer can slip in), while the URL's host stays the
 *   TLS server name and the name the certificate is verified against (and the `Host` header);
 * - a pooled socket was therefore connected to an address that was checked, so reusing it is safe;
 * - a route is resolved and checked again once `resolveTtlMs` has passed (DNS changes are honoured
 *   from then on). Same answer: the route and its sockets stay. Different answer: a new route (new
 *   agent) takes over and the old agent is retired (idle sockets closed, busy ones closed when their
 *   request ends). Refused or unresolvable answer: the route is dropped and the attempt fails
 *   with the guard's refusal, as before.
 *
 * The routes are keyed by host and port; one pool has one trusted-CA setting (the worker's).
 * Route expiry reads the injectable Clock (it is a schedule, like the retries), so tests can move
 * past it; a clock that went backwards expires the route too.
 */
import https from 'node:https';
import type net from 'node:net';
import type stream from 'node:stream';
import tls from 'node:tls';
import type { Clock } from '../kernel/clock.js';
import { hostOf, pinnedLookup, type ResolvedAddress, type UrlGuard } from './url-guard.js';

export interface ConnectionPoolOptions {
  /** How long a checked resolution (and the connections made to it) is used before the host is resolved and checked again. */
  resolveTtlMs?: number;
  /**
   * Idle keep-alive connections are closed after this long. Shorter than common server idle
   * timeouts (Node 5 s, load balancers 60 s) to avoid reusing a socket the server is closing; a
   * shorter `Keep-Alive: timeout=…` announced by the receiver is honoured by node:http.
   */
  idleSocketMs?: number;
  /** Extra trusted CA certificates (tests: the self-signed receiver); production uses the system store. */
  ca?: string | Buffer;
}

export const DEFAULT_RESOLVE_TTL_MS = 30_000;
export const DEFAULT_IDLE_SOCKET_MS = 4_000;

/** What a request needs to go out on a checked route. */
export interface Connection {
  /** The route's keep-alive agent. */
  agent: https.Agent;
  /** For a one-off connection outside the pool (the retry after a reused socket failed): the same checked addresses and TLS context. */
  lookup: net.LookupFunction;
  secureContext: tls.SecureContext;
}

/** An agent that can be retired: it stops pooling sockets and closes the idle ones. */
class RouteAgent extends https.Agent {
  private retired = false;

  override keepSocketAlive(socket: stream.Duplex): boolean {
    if (this.retired) return false;
    return super.keepSocketAlive(socket) as unknown as boolean;
  }

  retire(): void {
    this.retired = true;
    for (const sockets of Object.values(this.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
  }
}

interface Route {
  /** Sorted addresses: equal answers keep the route. */
  answer: string;
  checkedAt: number;
  lastUsedAt: number;
  connection: Connection;
  agent: RouteAgent;
}

export class ReceiverConnections {
  private readonly routes = new Map<string, Route>();
  /** Resolutions under way, so a burst of deliveries to one host resolves it once. */
  private readonly resolving = new Map<string, Promise<Route>>();
  private readonly resolveTtlMs: number;
  private readonly idleSocketMs: number;
  private readonly secureContext: tls.SecureContext;
  private lastSweep: number;

  constructor(
    private readonly guard: UrlGuard,
    private readonly clock: Clock,
    options: ConnectionPoolOptions = {},
  ) {
    this.resolveTtlMs = options.resolveTtlMs ?? DEFAULT_RESOLVE_TTL_MS;
    this.idleSocketMs = options.idleSocketMs ?? DEFAULT_IDLE_SOCKET_MS;
    // Building a TLS context (the whole CA store) per connection costs more than the handshake.
    this.secureContext = secureContextFor(options.ca);
    this.lastSweep = clock.now().getTime();
  }

  /**
   * The checked route to the URL's host: reuses the current one while it is fresh, otherwise
   * resolves and checks the host again. Throws the guard's UnsafeUrlError when it is refused.
   */
  async connectionFor(url: URL): Promise<Connection> {
    const host = hostOf(url);
    const key = `${host.toLowerCase()}|${url.port || '443'}`;
    const now = this.clock.now().getTime();
    this.sweep(now);
    const route = this.routes.get(key);
    if (route && now - route.checkedAt < this.resolveTtlMs && now >= route.checkedAt) {
      route.lastUsedAt = now;
      return route.connection;
    }
    let pending = this.resolving.get(key);
    if (!pending) {
      pending = this.refresh(key, host, now).finally(() => this.resolving.delete(key));
      this.resolving.set(key, pending);
    }
    return (await pending).connection;
  }

  /** Closes every pooled connection (the worker is stopping). */
  close(): void {
    for (const route of this.routes.values()) route.agent.retire();
    this.routes.clear();
  }

  /** Pooled sockets across all routes: open ones and idle ones (tests, metrics). */
  socketCount(): { active: number; idle: number } {
    let active = 0;
    let idle = 0;
    for (const { agent } of this.routes.values()) {
      for (const list of Object.values(agent.sockets)) active += list?.length ?? 0;
      for (const list of Object.values(agent.freeSockets)) idle += list?.length ?? 0;
    }
    return { active, idle };
  }

  private async refresh(key: string, host: string, now: number): Promise<Route> {
    let addresses: ResolvedAddress[];
    try {
      addresses = await this.guard.resolveChecked(host);
    } catch (err) {
      // Refused (or unresolvable) now: nothing pooled for this host may be used any more.
      this.routes.get(key)?.agent.retire();
      this.routes.delete(key);
      throw err;
    }
    const answer = addresses
      .map((a) => a.address)
      .sort()
      .join(',');
    const current = this.routes.get(key);
    if (current && current.answer === answer) {
      current.checkedAt = now;
      current.lastUsedAt = now;
      return current;
    }
    current?.agent.retire();
    const lookup = pinnedLookup(addresses);
    // Agent options reach every connection it makes: the pinned lookup and the shared TLS context.
    // The URL's host stays the server name and the certificate's expected name.
    const agent = new RouteAgent({
      keepAlive: true,
      timeout: this.idleSocketMs,
      scheduling: 'lifo',
      lookup,
      secureContext: this.secureContext,
    } as https.AgentOptions);
    const route: Route = { answer, checkedAt: now, lastUsedAt: now, agent, connection: { agent, lookup, secureContext: this.secureContext } };
    this.routes.set(key, route);
    return route;
  }

  /** Forgets routes unused for two TTLs (endpoints deleted or silent), closing their idle sockets. */
  private sweep(now: number): void {
    if (now - this.lastSweep < this.resolveTtlMs && now >= this.lastSweep) return;
    this.lastSweep = now;
    for (const [key, route] of this.routes) {
      if (now - route.lastUsedAt >= 2 * this.resolveTtlMs || now < route.lastUsedAt) {
        route.agent.retire();
        this.routes.delete(key);
      }
    }
  }
}

const contexts = new Map<string | Buffer | undefined, tls.SecureContext>();

/** One TLS client context per trusted-CA setting: the system store (plus NODE_EXTRA_CA_CERTS), or `ca` alone (as the `ca` option of a request would). */
export function secureContextFor(ca: string | Buffer | undefined): tls.SecureContext {
  let context = contexts.get(ca);
  if (!context) {
    context = tls.createSecureContext(ca === undefined ? {} : { ca });
    contexts.set(ca, context);
  }
  return context;
}
