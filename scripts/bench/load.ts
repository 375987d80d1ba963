/**
 * The load generator of the HTTP benchmarks, run as its own process (so it never shares an event
 * loop with the server): autocannon with the scenario given as JSON in argv[2]; prints one JSON
 * result line on stdout. A fresh Idempotency-Key per request when `freshIdempotencyKey` is set;
 * `paths` are cycled through when given; `overallRate` holds the load to a steady rate.
 */
import { randomUUID } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import autocannon from 'autocannon';

export interface LoadScenario {
  url: string;
  method: 'GET' | 'POST';
  paths: string[];
  headers: Record<string, string>;
  body?: string;
  connections: number;
  durationSeconds: number;
  freshIdempotencyKey?: boolean;
  /**
   * Requests per second across all connections, evenly spaced (an open loop, latency measured from
   * when each request was due: steadyLoad); absent: autocannon, each connection sending its next
   * request as soon as the previous one is answered.
   */
  overallRate?: number;
}

export interface LoadResult {
  requests: number;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** CPU time of this load generator per request (ms): it shares the machine with the server. */
  cpuMsPerRequest: number;
}

const scenario = JSON.parse(process.argv[2] ?? '{}') as LoadScenario;
let next = 0;
const cpuAtStart = process.cpuUsage();
const cpuMsPerRequest = (requests: number): number => {
  const used = process.cpuUsage(cpuAtStart);
  return (used.user + used.system) / 1000 / Math.max(1, requests);
};
const nextPath = (): string => scenario.paths[next++ % scenario.paths.length]!;

if (scenario.overallRate) steadyLoad(scenario.overallRate);
else closedLoop();

/** autocannon: every connection sends its next request as soon as the previous one is answered. */
function closedLoop(): void {
  const instance = autocannon(
    {
      url: scenario.url,
      connections: scenario.connections,
      duration: scenario.durationSeconds,
      pipelining: 1,
      requests: [
        {
          method: scenario.method,
          headers: scenario.headers,
          body: scenario.body,
          setupRequest: (request) => {
            const headers = scenario.freshIdempotencyKey ? { ...request.headers, 'Idempotency-Key': randomUUID() } : request.headers;
            return { ...request, path: nextPath(), headers };
          },
        },
      ],
    },
    (err, result) => {
      if (err) {
        process.stderr.write(`${String(err)}\n`);
        process.exit(1);
      }
      const out: LoadResult = {
        requests: result.requests.total,
        requestsPerSecond: result.requests.total / (result.duration || scenario.durationSeconds),
        p50: result.latency.p50,
        p99: result.latency.p99,
        max: result.latency.max,
        non2xx: result.non2xx,
        errors: result.errors,
        timeouts: result.timeouts,
        cpuMsPerRequest: cpuMsPerRequest(result.requests.total),
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
    },
  );
  process.once('SIGINT', () => instance.stop());
}

/**
 * An open loop at a steady rate over at most `connections` keep-alive connections: request i is
 * due at start + i / rate, whether or not earlier ones were answered, and its latency runs from
 * when it was due (a late send counts against the server, so no coordinated omission). autocannon's
 * own rate limit sends each second's quota in a burst at the start of the second, which measures
 * the burst's queue instead.
 */
function steadyLoad(rate: number): void {
  const agent = new HttpAgent({ keepAlive: true, maxSockets: scenario.connections });
  const latencies: number[] = [];
  let [non2xx, errors, due] = [0, 0, 0];
  const total = Math.round(rate * scenario.durationSeconds);
  const started = performance.now();
  let answered = 0;
  const finish = () => {
    const seconds = (performance.now() - started) / 1000;
    latencies.sort((a, b) => a - b);
    const at = (q: number) => Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN);
    const out: LoadResult = {
      requests: latencies.length,
      requestsPerSecond: latencies.length / seconds,
      p50: at(0.5),
      p99: at(0.99),
      max: Math.round(latencies[latencies.length - 1] ?? NaN),
      non2xx,
      errors,
      timeouts: 0,
      cpuMsPerRequest: cpuMsPerRequest(latencies.length),
    };
    agent.destroy();
    process.stdout.write(`${JSON.stringify(out)}\n`);
  };
  const send = (dueAt: number) => {
    const headers: Record<string, string> = { ...scenario.headers, ...(scenario.freshIdempotencyKey ? { 'Idempotency-Key': randomUUID() } : {}) };
    const req = httpRequest(new URL(nextPath(), scenario.url), { method: scenario.method, headers, agent }, (res) => {
      res.resume();
      res.once('end', () => {
        latencies.push(performance.now() - dueAt);
        if (res.statusCode === undefined || res.statusCode < 200 || res.statusCode >= 300) non2xx++;
        if (++answered === total) finish();
      });
    });
    req.once('error', () => {
      errors++;
      if (++answered === total) finish();
    });
    req.end(scenario.body);
  };
  const tick = () => {
    const now = performance.now();
    while (due < total && started + (due * 1000) / rate <= now) send(started + (due++ * 1000) / rate);
    if (due < total) setTimeout(tick, Math.max(0, started + (due * 1000) / rate - performance.now()));
  };
  tick();
}
