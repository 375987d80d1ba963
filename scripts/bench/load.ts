/**
 * The load generator of the HTTP benchmarks, run as its own process (so it never shares an event
 * loop with the server): autocannon with the scenario given as JSON in argv[2]; prints one JSON
 * result line on stdout. A fresh Idempotency-Key per request when `freshIdempotencyKey` is set;
 * `paths` are cycled through when given.
 */
import { randomUUID } from 'node:crypto';
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
          const path = scenario.paths[next++ % scenario.paths.length]!;
          const headers = scenario.freshIdempotencyKey ? { ...request.headers, 'Idempotency-Key': randomUUID() } : request.headers;
          return { ...request, path, headers };
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
      cpuMsPerRequest: (() => {
        const used = process.cpuUsage(cpuAtStart);
        return (used.user + used.system) / 1000 / Math.max(1, result.requests.total);
      })(),
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  },
);
process.once('SIGINT', () => instance.stop());
