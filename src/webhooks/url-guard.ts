/**
 * SSRF protection for webhook URLs. A merchant chooses the URL, our server makes the request:
 * without this, an endpoint could point Kassa at its own admin port, the database, a private
 * network or a cloud metadata service.
 *
 * The check runs when an endpoint is registered or changed (so the merchant gets a clear 400),
 * and again at delivery time (DNS can change after registration — "DNS rebinding"): the delivery
 * connection pool (connections.ts) resolves and checks the host, then gives its sockets exactly
 * those addresses (`pinnedLookup`), so the address checked is the address connected to. Pooled
 * connections are reused until the host is re-resolved and re-checked (every 30 s by default).
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolve: Resolve = async (hostname) => {
  const addresses = await dns.promises.lookup(hostname, { all: true, verbatim: true });
  return addresses.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export type UnsafeUrlReason = 'invalid_url' | 'not_https' | 'credentials' | 'forbidden_address' | 'unresolvable' | 'dns_error';

export class UnsafeUrlError extends Error {
  constructor(
    readonly reason: UnsafeUrlReason,
    message: string,
  ) {
    super(message);
    this.name = 'UnsafeUrlError';
  }
}

/** Names of metadata services that must never be reached, whatever they resolve to. */
const METADATA_HOSTS = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

/** IANA's global unicast block: IPv6 outside it is reserved, local or special, never a webhook receiver. */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');

const REFUSED = 'a loopback, private, link-local, reserved or metadata address';

/**
 * The IPv4 addresses an IPv6 address's traffic ends up at, for the forms that carry one (the
 * kernel, a tunnel relay or a translator sends it there), so the IPv4 addresses are what is judged.
 * `null`: a form whose IPv4 address cannot be told; `undefined`: not such a form.
 */
function carriedIpv4(v6: ipaddr.IPv6): ipaddr.IPv4[] | null | undefined {
  const p = v6.parts as [number, number, number, number, number, number, number, number];
  const ipv4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  switch (v6.range() as string) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d — the socket connects over IPv4
    case 'rfc6145': // ::ffff:0:a.b.c.d — IPv4-translated (SIIT)
      return [ipv4(p[6], p[7])];
    case 'rfc6052':
      // NAT64: 64:ff9b::/96, and the local-use 64:ff9b:1::/48 where the IPv4 address sits where the
      // operator's prefix length puts it; only its /96 form (the bits between zero) can be read.
      return p[3] === 0 && p[4] === 0 && p[5] === 0 ? [ipv4(p[6], p[7])] : null;
    case '6to4': // 2002:AABB:CCDD::/48 — relayed to AA.BB.CC.DD
      return [ipv4(p[1], p[2])];
    case 'teredo': // 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC — the server, and the client's address (inverted)
      return [ipv4(p[2], p[3]), ipv4(p[6] ^ 0xffff, p[7] ^ 0xffff)];
    case 'unicast':
      // IPv4-compatible ::a.b.c.d (deprecated, tunnelled to a.b.c.d); `::` and `::1` have their own range names.
      if (p[0] === 0 && p[1] === 0 && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) return [ipv4(p[6], p[7])];
      return undefined;
    default:
      return undefined;
  }
}

export interface UrlGuardOptions {
  /** `WEBHOOK_ALLOW_LOOPBACK`: let endpoints reach 127.0.0.0/8, ::1 and localhost (development and tests only). */
  allowLoopback: boolean;
  resolve?: Resolve;
}

export class UrlGuard {
  private readonly resolve: Resolve;

  constructor(private readonly options: UrlGuardOptions) {
    this.resolve = options.resolve ?? systemResolve;
  }

  /**
   * Why an IP address may not be reached, or undefined when it may: only globally routable unicast
   * may (ipaddr.js range names), and an IPv6 form carrying an IPv4 address is judged by that address.
   */
  refusal(address: string): string | undefined {
    if (net.isIP(address) === 0) return `"${address}" is not an IP address`;
    // ipaddr.js reads `::a.b.c.d` (IPv4-compatible, as getaddrinfo prints it) as IPv4-mapped `::ffff:a.b.c.d`.
    const ip = ipaddr.parse(address.replace(/^::(?=\d+\.)/, '0::'));
    if (ip.kind() === 'ipv4') return this.ipv4Refused(ip as ipaddr.IPv4, true) ? `${address} is ${REFUSED}` : undefined;
    const v6 = ip as ipaddr.IPv6;
    const carried = carriedIpv4(v6);
    if (carried === null) return `${address} is ${REFUSED}`;
    if (carried) {
      // Loopback is lifted only where a socket reaches it directly (IPv4-mapped), not through a relay or translator.
      const directly = v6.range() === 'ipv4Mapped';
      const bad = carried.find((v4) => this.ipv4Refused(v4, directly));
      return bad ? `${address} carries the IPv4 address ${bad.toString()}, ${REFUSED}` : undefined;
    }
    const range = v6.range();
    if (range === 'loopback' && this.options.allowLoopback) return undefined;
    if (range !== 'unicast' || !v6.match(GLOBAL_UNICAST)) return `${address} is ${REFUSED}`;
    return undefined;
  }

  private ipv4Refused(v4: ipaddr.IPv4, loopbackMayBeAllowed: boolean): boolean {
    const range = v4.range();
    if (range === 'loopback') return !(loopbackMayBeAllowed && this.options.allowLoopback);
    return range !== 'unicast';
  }

  /** Parses and checks the URL's form (https, no credentials); returns the host to resolve. */
  parse(raw: string): URL {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new UnsafeUrlError('invalid_url', 'url is not an absolute URL');
    }
    if (url.protocol !== 'https:') throw new UnsafeUrlError('not_https', 'url must use https');
    if (url.username !== '' || url.password !== '') throw new UnsafeUrlError('credentials', 'url must not contain credentials');
    if (url.hostname === '') throw new UnsafeUrlError('invalid_url', 'url has no host');
    return url;
  }

  /** Checks a URL fully: form, then every address its host resolves to. */
  async check(raw: string): Promise<void> {
    const url = this.parse(raw);
    await this.resolveChecked(hostOf(url));
  }

  /** Resolves a host and checks every address; IP literals are checked without DNS. */
  async resolveChecked(host: string): Promise<ResolvedAddress[]> {
    const name = host.toLowerCase().replace(/\.$/, '');
    const literal = net.isIP(name);
    if (literal !== 0) {
      const why = this.refusal(name);
      if (why) throw new UnsafeUrlError('forbidden_address', `url host ${why}`);
      return [{ address: name, family: literal as 4 | 6 }];
    }
    if (METADATA_HOSTS.has(name)) throw new UnsafeUrlError('forbidden_address', `url host ${name} is a cloud metadata service`);
    if (name === 'localhost' || name.endsWith('.localhost')) {
      // RFC 6761: always loopback, whatever a resolver says.
      if (!this.options.allowLoopback) throw new UnsafeUrlError('forbidden_address', `url host ${name} is loopback`);
    }
    let addresses: ResolvedAddress[];
    try {
      addresses = await this.resolve(name);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA' || code === 'EAI_NONAME') {
        throw new UnsafeUrlError('unresolvable', `url host ${name} does not resolve`);
      }
      throw new UnsafeUrlError('dns_error', `url host ${name} could not be resolved (${code ?? 'DNS error'})`);
    }
    if (addresses.length === 0) throw new UnsafeUrlError('unresolvable', `url host ${name} does not resolve`);
    for (const a of addresses) {
      const why = this.refusal(a.address);
      if (why) throw new UnsafeUrlError('forbidden_address', `url host ${name} resolves to ${why}`);
    }
    return addresses;
  }

  /**
   * A `lookup` for http(s).request: the socket connects only to addresses this guard approved in
   * the same resolution. Handles both the single-address and the `all: true` (autoSelectFamily) forms.
   */
  readonly lookup: net.LookupFunction = (hostname, options, callback) => {
    this.resolveChecked(hostname).then(
      (addresses) => answerLookup(hostname, addresses, options, callback),
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 4),
    );
  };
}

/**
 * A `lookup` that answers with `addresses` alone, whatever name it is asked for: the delivery
 * connection pool gives its sockets the addresses the guard checked, so no second, unchecked
 * resolution can happen between the check and the connection.
 */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): net.LookupFunction {
  return (hostname, options, callback) => answerLookup(hostname, addresses, options, callback);
}

function answerLookup(hostname: string, addresses: readonly ResolvedAddress[], options: dns.LookupOptions, callback: Parameters<net.LookupFunction>[2]): void {
  const wanted = options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses;
  if (wanted.length === 0) {
    callback(Object.assign(new Error(`no IPv${options.family} address for ${hostname}`), { code: 'ENOTFOUND' }), '', 4);
  } else if (options.all) {
    (callback as unknown as (err: null, addresses: dns.LookupAddress[]) => void)(null, wanted.map((a) => ({ address: a.address, family: a.family })));
  } else {
    callback(null, wanted[0]!.address, wanted[0]!.family);
  }
}

/** `[::1]` → `::1`: URL keeps brackets around IPv6 literals. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}
