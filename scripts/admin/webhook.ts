/**
 * `webhook deliveries|delivery|redeliver|test|listen`: the operator's view of webhook deliveries.
 *
 * `webhook listen --org ORG_… --forward http://localhost:4000/hooks` is for local development: a
 * receiver on a developer's machine cannot be registered as an endpoint (endpoints must be public
 * https URLs), so the CLI polls the admin API's event feed (GET /v1/orgs/{id}/webhook-events) once
 * a second and POSTs each new event to the local URL itself. The server renders and signs every
 * event exactly like a delivery (same headers, `v1a` signatures with the published keys), so the
 * local receiver runs its real verification against `GET {api_url}/v1/webhooks/signing-key`.
 * Listening starts "from now"; there are no retries (it prints each answer). Unlike the other
 * commands it streams: one JSON line per forwarded event on stdout, until Ctrl-C.
 */
import type { Command } from 'commander';
import { parsePositiveInt, usageError, type CliContext } from './cli.js';

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
    .description("Forward the organization's new events, signed, to a local receiver (development); one JSON line per event, until Ctrl-C")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--forward <url>', 'local receiver, e.g. http://localhost:4000/webhooks', parseForwardUrl)
    .option('--interval-ms <n>', 'pause between polls (default 1000)', parsePositiveInt)
    .action(async (opts: { org: string; forward: string; intervalMs?: number }) => {
      let stopped = false;
      const stop = () => {
        stopped = true;
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      let { cursor } = await listenOnce(ctx, opts.org, undefined, opts.forward);
      process.stderr.write(`Listening for events of ${opts.org}; forwarding to ${opts.forward} (Ctrl-C to stop)\n`);
      while (!stopped) {
        await sleep(opts.intervalMs ?? 1000);
        if (stopped) break;
        const round = await listenOnce(ctx, opts.org, cursor, opts.forward);
        cursor = round.cursor;
        for (const result of round.forwarded) process.stdout.write(`${JSON.stringify(result)}\n`);
      }
    });
}
