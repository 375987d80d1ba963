/**
 * Redaction by value, for secrets that reach a log inside text no field path can name: a chain
 * RPC provider's key in a URL quoted by a library's error message, or echoed back by the provider.
 * The logger blanks every registered value in each line it writes (src/kernel/logger.ts).
 */

const CENSOR = '[redacted]';
/** Shorter values are not taken: blanking them would blank ordinary words and numbers in every line. */
const MIN_SECRET_LENGTH = 8;
/** A path segment this long is a key (providers' keys are 32-64 characters), not a route like `v2` or `mainnet`. */
const MIN_PATH_KEY_LENGTH = 16;

export class SecretValues {
  /** Longest first, so a value containing another is blanked whole. */
  private values: string[] = [];

  /** Registers a secret with the forms it takes in a log line (JSON-escaped, percent-encoded). */
  add(value: string | undefined): void {
    if (!value || value.length < MIN_SECRET_LENGTH) return;
    const forms = new Set([value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value)]);
    for (const form of forms) if (!this.values.includes(form)) this.values.push(form);
    this.values.sort((a, b) => b.length - a.length);
  }

  get size(): number {
    return this.values.length;
  }

  scrub(text: string): string {
    let out = text;
    for (const value of this.values) if (out.includes(value)) out = out.split(value).join(CENSOR);
    return out;
  }
}

/**
 * The parts of a URL that may be credentials: the user info, the path and query as a whole, each
 * long path segment (`/v2/<key>`, `/<key>`) and each query value (`?apikey=<key>`). The scheme,
 * host and port are not secrets: they are what a log line names the endpoint by.
 */
export function urlSecretParts(raw: string): string[] {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return [raw];
  }
  const parts = [raw, url.href];
  if (url.username || url.password) parts.push(`${url.username}:${url.password}`, url.username, url.password, decodeSafe(url.password));
  const pathAndQuery = `${url.pathname}${url.search}`;
  if (pathAndQuery !== '/') parts.push(pathAndQuery, url.pathname === '/' ? '' : url.pathname, url.search);
  for (const segment of url.pathname.split('/')) {
    if (segment.length >= MIN_PATH_KEY_LENGTH) parts.push(segment, decodeSafe(segment));
  }
  for (const [, value] of url.searchParams) parts.push(value, encodeURIComponent(value));
  return [...new Set(parts.filter((part) => part.length >= MIN_SECRET_LENGTH))];
}

const decodeSafe = (text: string): string => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

const URL_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"'<>`]+)([^\s"'<>`]*)/gi;

/** Text with every URL cut down to its scheme and host (`https://eth.example/…`), user info dropped. */
export function withoutUrlPaths(text: string): string {
  return text.replace(URL_IN_TEXT, (_match, scheme: string, authority: string, rest: string) => {
    const host = authority.includes('@') ? authority.slice(authority.lastIndexOf('@') + 1) : authority;
    return `${scheme}${host}${rest ? '/…' : ''}`;
  });
}
