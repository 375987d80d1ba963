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
import net, { BlockList } from 'node:net';

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

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Addresses a webhook may never reach (loopback is here too; the dev flag lifts only that part). */
const forbidden = new BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT (Alibaba Cloud metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (AWS/GCP/Azure metadata 169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments (Oracle metadata 192.0.0.192)
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  forbidden.addSubnet(net4, prefix, 'ipv4');
}
for (const [net6, prefix] of [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local (AWS IPv6 metadata fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
] as const) {
  forbidden.addSubnet(net6, prefix, 'ipv6');
}

/** Names of metadata services that must never be reached, whatever they resolve to. */
const METADATA_HOSTS = new Set(['metadata', 'metadata.google.internal', 'metadata.goog', 'instance-data', 'instance-data.ec2.internal']);

/** An IPv4 address embedded in an IPv6 one (`::ffff:10.0.0.1`, NAT64 `64:ff9b::a00:1`), if any. */
function embeddedIpv4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:(?:0:)?|64:ff9b::|::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1];
  const hex = /^(?:::ffff:(?:0:)?|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
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

  /** Why an IP address may not be reached, or undefined when it may. */
  refusal(address: string): string | undefined {
    const family = net.isIP(address);
    if (family === 0) return `"${address}" is not an IP address`;
    const v4 = family === 6 ? embeddedIpv4(address) : address;
    const [ip, type] = v4 ? [v4, 'ipv4' as const] : [address, 'ipv6' as const];
    if (this.options.allowLoopback && loopback.check(ip, type)) return undefined;
    if (forbidden.check(ip, type)) return `${address} is a loopback, private, link-local, reserved or metadata address`;
    return undefined;
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
