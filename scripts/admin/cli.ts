/**
 * Shared pieces of the admin CLI: the connection (URL + token), the typed openapi-fetch client,
 * the output contract (one JSON document on stdout, or a table with --table; one JSON error
 * document on stderr) and the flag parsers every noun uses.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError } from 'commander';
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from '../../generated/admin.js';
import { ADMIN_TOKEN_FILE } from '../../src/kernel/local-secrets.js';

export type AdminClient = Client<paths>;

/** Exit codes: 1 = the request failed (API error, unreachable server), 2 = the command line is wrong. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/**
 * Every failure the CLI reports. `code` is the API's error code when the server answered, or one
 * of the CLI's own codes (USAGE_ERROR, SERVER_UNREACHABLE, ADMIN_TOKEN_MISSING, BAD_RESPONSE);
 * `status` is the HTTP status, null when no HTTP answer is involved.
 */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number | null = null,
    readonly exitCode: number = EXIT_FAILURE,
  ) {
    super(message);
  }

  toJSON(): { error: { code: string; message: string; status: number | null } } {
    return { error: { code: this.code, message: this.message, status: this.status } };
  }
}

export const usageError = (message: string): CliError => new CliError('USAGE_ERROR', message, null, EXIT_USAGE);

export interface Connection {
  baseUrl: string;
  /** Resolved on first request, so `--help` and usage errors never touch the token file. */
  token: () => string;
}

/**
 * ADMIN_URL, else the address the server binds its admin app to (ADMIN_HOST/ADMIN_PORT with the
 * server's defaults). A wildcard bind address is not connectable, so it means loopback here.
 */
export function connectionFromEnv(env: Record<string, string | undefined> = process.env): Connection {
  let baseUrl = env.ADMIN_URL?.trim();
  if (!baseUrl) {
    let host = env.ADMIN_HOST || '127.0.0.1';
    if (host === '0.0.0.0' || host === '::' || host === '[::]') host = '127.0.0.1';
    if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`;
    baseUrl = `http://${host}:${env.ADMIN_PORT || 3002}`;
  }
  baseUrl = baseUrl.replace(/\/+$/, '');
  let cached: string | undefined;
  const token = (): string => {
    if (cached !== undefined) return cached;
    if (env.ADMIN_TOKEN) return (cached = env.ADMIN_TOKEN);
    const file = path.resolve(env.DATA_DIR || './data', ADMIN_TOKEN_FILE);
    try {
      cached = readFileSync(file, 'utf8').trim();
    } catch (err) {
      const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : `cannot be read (${(err as Error).message})`;
      throw new CliError(
        'ADMIN_TOKEN_MISSING',
        `No admin token: ADMIN_TOKEN is not set and ${file} ${reason}. Start the server once (npm start) so it generates the token, or set ADMIN_TOKEN (and DATA_DIR if the server uses another data folder).`,
      );
    }
    if (!cached) throw new CliError('ADMIN_TOKEN_MISSING', `No admin token: ${file} is empty. Set ADMIN_TOKEN.`);
    return cached;
  };
  return { baseUrl, token };
}

/** A one-shot CLI must not hang on a black-holed address. */
const REQUEST_TIMEOUT_MS = 30_000;

export function createAdminClient(connection: Connection): AdminClient {
  const client = createClient<paths>({
    baseUrl: connection.baseUrl,
    fetch: (request) => fetch(request, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }),
  });
  client.use({
    onRequest: ({ request }) => {
      request.headers.set('Authorization', `Bearer ${connection.token()}`);
      return request;
    },
    // Only network-level failures get here (refused, DNS, timeout); HTTP errors are answers.
    onError: ({ error }) => {
      if (error instanceof CliError) return error;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const detail =
        (error as Error).name === 'TimeoutError'
          ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`
          : (cause?.code ?? cause?.message ?? (error as Error).message);
      return new CliError(
        'SERVER_UNREACHABLE',
        `Cannot reach the admin API at ${connection.baseUrl} (${detail}). Is the server running? npm start`,
      );
    },
  });
  return client;
}

type FetchResult<D> = { data?: D; error?: unknown; response: Response };

/**
 * Awaits an openapi-fetch call and returns the envelope's `data`, or throws a CliError carrying
 * the API's `error.code` and the HTTP status.
 */
export async function call<D extends { data: unknown }>(request: Promise<FetchResult<D>>): Promise<D['data']> {
  let result: FetchResult<D>;
  try {
    result = await request;
  } catch (err) {
    if (err instanceof CliError) throw err;
    // A 2xx whose body does not parse: something other than the admin API is listening there.
    throw new CliError('BAD_RESPONSE', `Unexpected answer from the admin API: ${(err as Error).message}. Is ADMIN_URL the admin port?`);
  }
  const { response } = result;
  if (response.ok && result.data !== undefined) return result.data.data;
  const envelope = result.error as { error?: { code?: unknown; message?: unknown } } | undefined;
  if (envelope && typeof envelope === 'object' && typeof envelope.error?.code === 'string') {
    throw new CliError(envelope.error.code, String(envelope.error.message ?? ''), response.status);
  }
  throw new CliError(
    'BAD_RESPONSE',
    `Unexpected answer from the admin API (HTTP ${response.status}${response.ok ? ', empty body' : ''}). Is ADMIN_URL the admin port?`,
    response.status,
  );
}

// ---- flag parsers (commander turns InvalidArgumentError into a usage error) ----

export function parseBool(value: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new InvalidArgumentError('Expected true or false.');
}

export function parsePositiveInt(value: string): number {
  if (!/^[1-9][0-9]{0,8}$/.test(value)) throw new InvalidArgumentError('Expected a positive integer.');
  return Number(value);
}

/** `a,b , c` → ['a','b','c']; the allowed values are the spec's to check, not the CLI's. */
export function parseList(value: string): string[] {
  const items = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
  if (items.length === 0) throw new InvalidArgumentError('Expected a comma-separated list.');
  return items;
}

// ---- output ----

export type OutputFormat = 'json' | 'table';

export interface CliContext {
  /** The typed client of the admin API (openapi-fetch over generated/admin.ts). */
  readonly client: AdminClient;
  /** Set from the global --table flag before any action runs. */
  format: OutputFormat;
  /** Prints a command's result: JSON by default, a table with --table. */
  print(data: unknown): void;
  call: typeof call;
}

export function createContext(client: AdminClient, out: (text: string) => void = (t) => process.stdout.write(t)): CliContext {
  const ctx: CliContext = {
    client,
    format: 'json',
    print(data) {
      out(ctx.format === 'table' ? renderTable(data) : `${JSON.stringify(data, null, 2)}\n`);
    },
    call,
  };
  return ctx;
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(cell).join(',');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function grid(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `│ ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' │ ')} │`;
  const rule = (l: string, m: string, r: string) => `${l}${widths.map((w) => '─'.repeat(w + 2)).join(m)}${r}`;
  return [rule('┌', '┬', '┐'), line(header), rule('├', '┼', '┤'), ...rows.map(line), rule('└', '┴', '┘')].join('\n') + '\n';
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function listTable(records: unknown[]): string {
  if (records.length === 0) return '(no records)\n';
  const columns: string[] = [];
  for (const record of records) {
    for (const key of Object.keys(isRecord(record) ? record : { value: record })) if (!columns.includes(key)) columns.push(key);
  }
  return grid(
    columns,
    records.map((record) => columns.map((c) => cell(isRecord(record) ? record[c] : record))),
  );
}

/** Lists become one row per record (pages get a footer); single objects a key/value table. */
export function renderTable(data: unknown): string {
  if (Array.isArray(data)) return listTable(data);
  if (isRecord(data) && Array.isArray(data.records)) {
    const { records, ...meta } = data;
    const footer = Object.entries(meta)
      .map(([k, v]) => `${k}: ${cell(v)}`)
      .join('  ');
    return listTable(records) + (footer ? `${footer}\n` : '');
  }
  if (isRecord(data)) return grid(['field', 'value'], Object.entries(data).map(([k, v]) => [k, cell(v)]));
  return `${cell(data)}\n`;
}
