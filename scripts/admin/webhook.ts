/**
 * `webhook deliveries|delivery|redeliver|test|listen`: the operator's view of webhook deliveries.
 *
 * `webhook listen --org ORG_… --forward http://localhost:4000/hooks` is for local development: a
 * receiver on a developer's machine cannot be registered as an endpoint (endpoints must be public
 * https URLs), so the CLI polls the admin API's event feed (GET /v1/orgs/{id}/webhook-events) once
 * a second and POSTs each new event to the local URL itself. The server renders and signs every
 * event exactly like a delivery (same headers, `v1a` signatures with the published keys), so the
 * local receiver runs its real verification against `GET {api_url}/v1/webhooks/signing-key`.
 * Listening starts "from now"; there are no retries of a forward (it prints each answer). Unlike
 * the other commands it streams: one JSON line per forwarded event on stdout, until Ctrl-C. When
 * the server goes away (a restart), it says so once on stderr, retries with capped exponential
 * backoff and jitter, says so once when it is back, and carries on from its cursor.
 */
import type { Command } from 'commander';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { CliError, parsePositiveInt, usageError, type CliContext } from './cli.js';

/** What one forward produced (one NDJSON line of `webhook listen`). */
export interface ForwardResult {
  eventId: string;
  type: string;
  status: number | null;
  durationMs: number;
  error: string | null;
}

const FORWARD_TIMEOUT_MS = 10_000;

/** POSTs one signed event to the local receiver, exactly as the server would deliver it. */
export async function forwardEvent(
  forwardUrl: string,
  event: { eventId: string; type: string; headers: Record<string, string>; body: string },
): Promise<ForwardResult> {
  const started = performance.now();
  try {
    const res = await fetch(forwardUrl, {
      method: 'POST',
      headers: { ...event.headers, 'content-type': 'application/json', 'user-agent': 'Kassa-Webhooks/1.0 (webhook listen)' },
      body: event.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
    await res.arrayBuffer().catch(() => undefined);
    return { eventId: event.eventId, type: event.type, status: res.status, durationMs: Math.round(performance.now() - started), error: null };
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause?.code;
    return { eventId: event.eventId, type: event.type, status: null, durationMs: Math.round(performance.now() - started), error: cause ?? (err as Error).message };
  }
}

/**
 * One poll: fetches the events after `cursor` (or, without one, only the current cursor) and
 * forwards them in order. Returns the next cursor and what was forwarded.
 */
export async function listenOnce(ctx: CliContext, orgId: string, cursor: number | undefined, forwardUrl: string): Promise<{ cursor: number; forwarded: ForwardResult[] }> {
  const query = cursor === undefined ? {} : { after: cursor };
  const feed = await ctx.call(ctx.client.GET('/v1/orgs/{id}/webhook-events', { params: { path: { id: orgId }, query } }));
  const forwarded: ForwardResult[] = [];
  for (const event of feed.events) forwarded.push(await forwardEvent(forwardUrl, event));
  return { cursor: feed.cursor, forwarded };
}

function parseForwardUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw usageError(`--forward must be an absolute http(s) URL, got "${value}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw usageError(`--forward must be http or https, got "${value}"`);
  return url.toString();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function register(program: Command, ctx: CliContext): void {
  const webhook = program.command('webhook').description('Webhook deliveries: inspect, redeliver, test, listen locally');

  webhook
    .command('deliveries')
    .description("List an organization's deliveries, newest first, with every attempt")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--event <id>', 'only deliveries of this event (EVT_..., the webhook-id)')
    .option('--page <n>', 'page number (default 1)', parsePositiveInt)
    .option('--size <n>', 'page size (default 20, at most 100)', parsePositiveInt)
    .action(async (opts: { org: string; event?: string; page?: number; size?: number }) => {
      const query: { event?: string; page?: number; size?: number } = {};
      if (opts.event !== undefined) query.event = opts.event;
      if (opts.page !== undefined) query.page = opts.page;
      if (opts.size !== undefined) query.size = opts.size;
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/webhook-deliveries', { params: { path: { id: opts.org }, query } })));
    });

  webhook
    .command('delivery')
    .description('Show one delivery with its attempts')
    .requiredOption('--id <deliveryId>', 'delivery id (WHD_...)')
    .action(async (opts: { id: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/webhook-deliveries/{id}', { params: { path: { id: opts.id } } })));
    });

  webhook
    .command('redeliver')
    .description("Queue the delivery's event to its endpoint again (new delivery, same webhook-id, 12 fresh attempts)")
    .requiredOption('--delivery <id>', 'delivery id (WHD_...)')
    .action(async (opts: { delivery: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/webhook-deliveries/{id}/redeliver', { params: { path: { id: opts.delivery } } })));
    });

  webhook
    .command('test')
    .description('Send a signed webhook.test event to one endpoint; waits for the first attempt and prints the delivery')
    .requiredOption('--endpoint <id>', 'endpoint id (WHE_...)')
    .option('--wait-seconds <n>', 'how long to wait for the first attempt (default 20; 0 = do not wait)', (v) => (v === '0' ? 0 : parsePositiveInt(v)))
    .action(async (opts: { endpoint: string; waitSeconds?: number }) => {
      let delivery = await ctx.call(ctx.client.POST('/v1/webhook-endpoints/{id}/test', { params: { path: { id: opts.endpoint } } }));
      const deadline = performance.now() + (opts.waitSeconds ?? 20) * 1000;
      while (delivery.attempts.length === 0 && delivery.status === 'pending' && performance.now() < deadline) {
        await sleep(500);
        delivery = await ctx.call(ctx.client.GET('/v1/webhook-deliveries/{id}', { params: { path: { id: delivery.deliveryId } } }));
      }
      ctx.print(delivery);
    });

  webhook
    .command('listen')
    .description("Forward the organization's new events, signed, to a local receiver (development); one JSON line per event, until Ctrl-C; reconnects when the server restarts")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--forward <url>', 'local receiver, e.g. http://localhost:4000/webhooks', parseForwardUrl)
    .option('--interval-ms <n>', 'pause between polls (default 1000)', parsePositiveInt)
    .option('--verbose', 'also print a line per poll and per reconnection attempt (stderr)')
    .action(async (opts: { org: string; forward: string; intervalMs?: number; verbose?: boolean }) => {
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await listen(ctx, {
          orgId: opts.org,
          forwardUrl: opts.forward,
          intervalMs: opts.intervalMs ?? 1000,
          verbose: opts.verbose ?? false,
          signal: stop.signal,
          out: (line) => process.stdout.write(`${line}\n`),
          status: (line) => process.stderr.write(`${line}\n`),
        });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}

/** Reconnection backoff: from half a second, doubling, at most 30 s between attempts. */
export const RECONNECT_BASE_MS = 500;
export const RECONNECT_CAP_MS = 30_000;

/**
 * The pause before reconnection attempt `attempt` (0-based): the capped exponential delay, half of
 * it fixed and half random ("equal jitter"), so listeners restarted together do not poll in step.
 */
export function reconnectDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Worth retrying: the server is away (unreachable, answered something else while starting) or
 * answered 5xx (its database restarting). A 4xx (wrong token, unknown organization) is final.
 */
function isTransient(err: unknown): boolean {
  if (!(err instanceof CliError)) return false;
  if (err.code === 'SERVER_UNREACHABLE' || err.code === 'BAD_RESPONSE') return true;
  return err.status !== null && err.status >= 500;
}

export interface ListenOptions {
  orgId: string;
  forwardUrl: string;
  intervalMs: number;
  verbose: boolean;
  signal: AbortSignal;
  /** One NDJSON line per forwarded event. */
  out(line: string): void;
  /** Human status lines (stderr). */
  status(line: string): void;
  random?: () => number;
}

/** Sleeps, or returns early (false) when listening was stopped. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleepFor(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/**
 * The `webhook listen` loop. The first poll must reach the server (a wrong ADMIN_URL or token
 * fails at once); after that, losing the server is expected (restarts) and retried.
 */
export async function listen(ctx: CliContext, options: ListenOptions): Promise<void> {
  const { orgId, forwardUrl, signal } = options;
  let { cursor } = await listenOnce(ctx, orgId, undefined, forwardUrl);
  options.status(`Listening for events of ${orgId}; forwarding to ${forwardUrl} (Ctrl-C to stop)`);
  let lostSince: number | null = null;
  let attempt = 0;
  let wait = options.intervalMs;
  while (await pause(wait, signal)) {
    try {
      const round = await listenOnce(ctx, orgId, cursor, forwardUrl);
      if (lostSince !== null) {
        options.status(`Reconnected to the admin API after ${Math.round((performance.now() - lostSince) / 1000)} s; forwarding the events since then`);
        lostSince = null;
        attempt = 0;
      }
      cursor = round.cursor;
      for (const result of round.forwarded) options.out(JSON.stringify(result));
      if (options.verbose) options.status(`poll: ${round.forwarded.length} event(s), cursor ${cursor}`);
      wait = options.intervalMs;
    } catch (err) {
      if (!isTransient(err)) throw err;
      if (lostSince === null) {
        lostSince = performance.now();
        options.status(`Lost the connection: ${(err as Error).message} Reconnecting with backoff (Ctrl-C to stop).`);
      }
      wait = reconnectDelayMs(attempt++, options.random);
      if (options.verbose) options.status(`reconnect attempt ${attempt} failed (${(err as CliError).code}); next in ${wait} ms`);
    }
  }
}
