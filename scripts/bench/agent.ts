/**
 * `npm run bench:agent`: signed `POST /v1/agent-wallet/sign-typed-data` requests per second
 * through the whole stack against PostgreSQL, compared with a floor.
 *
 * - Server: Kassa in a process of its own, started as `npm start --role api` starts it (the same
 *   node flags, production settings, the platform listener's whole stack: HTTP, OpenAPI
 *   validation, P-256 request authentication with replay memory, wallet authorization signature,
 *   typed-data validation, policies, EIP-712 hashing and signing, history write, request metrics)
 *   on a throw-away database on BENCH_DATABASE_URL's server (default
 *   postgres://postgres@127.0.0.1:5432/postgres), dropped afterwards; the organization, wallet
 *   and agent are made through its admin API. The wallet has the default policy a new wallet gets
 *   (no spend limit). Its CPU time is read from its /metrics (process.cpuUsage: all its threads)
 *   when the measured window starts and ends. BENCH_SERVER_NODE_ARGS="--cpu-prof
 *   --cpu-prof-dir=…" profiles it.
 * - Load: another process (this file with `--load`) keeps BENCH_CONCURRENCY requests in flight
 *   (default 8), each signed just in time (headers and wallet authorization) over a transfer with
 *   a fresh EIP-3009 nonce; BENCH_WARMUP seconds of warm-up (default 3), then BENCH_DURATION
 *   seconds measured (default 10). BENCH_CLIENT=sdk (default) sends with the agent client,
 *   createAgentClient (openapi-fetch over fetch); BENCH_CLIENT=http signs with the same client's
 *   helpers (signAgentRequest, signWalletAuthorization) and sends over node:http with keep-alive:
 *   the server gets the same requests, the load generator uses about a third of the CPU.
 * - Floor: after the load, one P-256 verification (node:crypto, cached KeyObject, as the server
 *   verifies) plus one secp256k1 signature of a digest (src/agent-wallet/wallet-signer.ts, the
 *   server's own signer) in a bare loop on one thread: the least cryptography any implementation
 *   of the route does per request (the route itself verifies twice: headers and authorization);
 *   the best of five one-second rounds, counted per second of CPU time (not of the clock, which on
 *   a loaded machine also counts waiting for a core).
 *
 * Prints req/s, p50/p99 latency, the floor, the ratio requests/floor (target ≥ 0.60), the machine
 * bound (the req/s of a server that spent nothing but the route's own cryptography, sharing the
 * cores with PostgreSQL and the load generator at their measured CPU per request), and the CPU
 * time per request of the server process (all its threads, user and system), of the load
 * generator and of the database's PostgreSQL processes (from /proc when PostgreSQL runs on this
 * machine). The three share this machine's CPUs, so req/s is bounded by their sum; the floor's
 * time per operation over the server's CPU per request is what the ratio would be if the server
 * had a core to itself.
 *
 * Measured on the 2-core development machine under the bench lock (see docs/benchmarks.md):
 * 390-680 req/s with BENCH_CLIENT=http and about 500 with the SDK client, p99 26-35 ms, against a
 * floor of 2,140-2,980 ops/s: a ratio of 0.17-0.25, the 0.60 target missed. Per request the server
 * spends 1.5-2.5 ms of CPU, the floor 0.33-0.47 ms per operation; the load generator (0.36-0.6 ms
 * over node:http, 1.0 ms with the SDK) and PostgreSQL (0.35-0.65 ms) take the rest of the two
 * cores, so 60 % of the floor (1,300-1,800 req/s, at most 1.1-1.5 ms of machine CPU per request)
 * is out of reach on this machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createAgentClient, loadAgentWalletKey, signAgentRequest, signWalletAuthorization, type TypedData } from '../../src/client/agent.js';
import { requestPayload, SIGN_TYPED_DATA_PATH } from '../../src/agent-wallet/protocol.js';
import { p256PublicKey, verifyP256 } from '../../src/agent-wallet/p256.js';
import { signDigest } from '../../src/agent-wallet/wallet-signer.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/agent-wallet/default-policy.js';
import { createDatabase, http, newDeployment, startKassa, type KassaProcess } from '../../tools/cluster.js';
import { postgresCpuSeconds } from './postgres-cpu.js';
import { emit, report, round, shortRun, summary, target } from './summary.js';

/** `sdk`: createAgentClient (openapi-fetch over fetch); `http`: the SDK's signing helpers over node:http. */
type LoadClient = 'sdk' | 'http';

const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const CLIENT: LoadClient = process.env.BENCH_CLIENT === 'http' ? 'http' : 'sdk';
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_SECONDS = Number(process.env.BENCH_DURATION ?? (shortRun ? 4 : 10));
const FLOOR_ROUNDS = shortRun ? 2 : 5;
const TARGET_RATIO = 0.6;

interface LoadJob {
  client: LoadClient;
  baseUrl: string;
  agentWalletKey: string;
  walletAddress: string;
  concurrency: number;
  warmupSeconds: number;
  durationSeconds: number;
}

interface LoadResult {
  signed: number;
  failed: number;
  firstFailure: string | null;
  seconds: number;
  p50: number;
  p99: number;
  max: number;
  cpuMs: number;
}

type LoadMessage = { type: 'measuring' } | { type: 'done'; result: LoadResult };

/** USDC on Base: the default policy allows up to 5 USDC per signature there. */
const transfer = (from: string, i: number) => ({
  domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
  types: TRANSFER_WITH_AUTHORIZATION_TYPES,
  primary_type: 'TransferWithAuthorization',
  message: {
    from,
    to: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
    value: String(1_000_000 + (i % 1000)),
    validAfter: '0',
    validBefore: '4102444800',
    nonce: `0x${randomBytes(32).toString('hex')}`,
  },
});

// ---------------------------------------------------------------------------------------------
// Load generator (second process)

/**
 * A lighter way to send the same requests: the client's own signing helpers (headers and wallet
 * authorization, signed just in time as the SDK does), the body as JSON, node:http with
 * keep-alive. The server sees the same bytes as from the SDK; the load generator spends less CPU.
 */
function httpSigner(job: LoadJob, appId: string): (typedData: TypedData) => Promise<void> {
  const key = loadAgentWalletKey(job.agentWalletKey);
  const url = new URL(SIGN_TYPED_DATA_PATH, job.baseUrl);
  const agent = new HttpAgent({ keepAlive: true, maxSockets: job.concurrency });
  return (typedData) =>
    new Promise<void>((resolve, reject) => {
      const body = { typed_data: typedData };
      const payload = JSON.stringify({ ...body, signature: signWalletAuthorization(key.privateKey, { url: url.href, body, appId }) });
      const req = httpRequest(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            ...signAgentRequest(key, 'POST', SIGN_TYPED_DATA_PATH, Math.floor(Date.now() / 1000)),
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: { signature?: string }; error?: { code?: string; message?: string } };
            if (res.statusCode === 200 && answer.data?.signature) resolve();
            else reject(new Error(`HTTP ${res.statusCode} ${answer.error?.code ?? ''}: ${answer.error?.message ?? ''}`));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
}

async function runLoad(job: LoadJob, send: (message: LoadMessage) => void): Promise<void> {
  const client = createAgentClient({ agentWalletKey: job.agentWalletKey, baseUrl: job.baseUrl });
  const { appId } = await client.identity();
  const signTypedData = job.client === 'http' ? httpSigner(job, appId) : (typedData: TypedData) => client.signTypedData(typedData);
  let i = 0;
  const phase = async (seconds: number, latencies: number[] | null) => {
    const stopAt = performance.now() + seconds * 1000;
    let signed = 0;
    let failed = 0;
    let firstFailure: string | null = null;
    await Promise.all(
      Array.from({ length: job.concurrency }, async () => {
        while (performance.now() < stopAt) {
          const started = performance.now();
          try {
            await signTypedData(transfer(job.walletAddress, i++));
            signed++;
          } catch (err) {
            failed++;
            firstFailure ??= err instanceof Error ? `${err.name}: ${err.message}` : String(err);
          }
          latencies?.push(performance.now() - started);
        }
      }),
    );
    return { signed, failed, firstFailure };
  };
  await phase(job.warmupSeconds, null);
  send({ type: 'measuring' });
  const latencies: number[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  const { signed, failed, firstFailure } = await phase(job.durationSeconds, latencies);
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  send({
    type: 'done',
    result: { signed, failed, firstFailure, seconds, p50: at(0.5), p99: at(0.99), max: at(1), cpuMs: (used.user + used.system) / 1000 },
  });
}

// ---------------------------------------------------------------------------------------------
// Server process, floor and report (this process)

/**
 * One P-256 verification + one secp256k1 signature, in a bare loop: operations per second, the
 * best of `rounds` one-second rounds (the least disturbed by whatever else runs on the machine:
 * the floor is then the highest, and the ratio the most pessimistic).
 */
function floor(rounds: number): number {
  let best = 0;
  for (let round = 0; round < rounds; round++) best = Math.max(best, floorRound(1));
  return best;
}

/** A request signature as the server verifies it: cached public key, payload, DER signature. */
function signedRequestFixture() {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const agent = { publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), privateKey };
  const key = p256PublicKey(agent.publicKey)!;
  const payload = requestPayload('POST', SIGN_TYPED_DATA_PATH, '1763800000');
  const signature = Buffer.from(signAgentRequest(agent, 'POST', SIGN_TYPED_DATA_PATH, 1763800000)['X-Agent-Signature'], 'base64');
  return { key, payload, signature };
}

/**
 * Operations per second of this process's CPU time, not of the clock: on a loaded machine a
 * clock-timed loop also counts the time it waited for a core, which made the floor look slower
 * (and the route's ratio better) the busier the machine was. The load is over by now, so the
 * process's CPU is the loop's.
 */
const cpuSecondsSince = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

function floorRound(seconds: number): number {
  const { key, payload, signature } = signedRequestFixture();
  const walletKey = randomBytes(32);
  const digests = Array.from({ length: 256 }, () => randomBytes(32));
  let ops = 0;
  const started = performance.now();
  const cpu = process.cpuUsage();
  while (performance.now() - started < seconds * 1000) {
    if (!verifyP256(key, payload, signature)) throw new Error('floor: verification failed');
    signDigest(digests[ops % digests.length]!, walletKey);
    ops++;
  }
  return ops / cpuSecondsSince(cpu);
}

/** One P-256 verification alone, the same way (best of `rounds` one-second rounds): ops/s. */
function verifyAlone(rounds: number): number {
  const { key, payload, signature } = signedRequestFixture();
  let best = 0;
  for (let round = 0; round < rounds; round++) {
    let ops = 0;
    const started = performance.now();
    const cpu = process.cpuUsage();
    while (performance.now() - started < 1000) {
      if (!verifyP256(key, payload, signature)) throw new Error('floor: verification failed');
      ops++;
    }
    best = Math.max(best, ops / cpuSecondsSince(cpu));
  }
  return best;
}

async function main(): Promise<void> {
  const db = await createDatabase(serverUrl, 'kassa_bench');
  const name = new URL(db.url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  let child: ChildProcess | undefined;
  let server: KassaProcess | undefined;
  try {
    // Started as `npm start --role api` starts it (its node flags, production settings on
    // PostgreSQL), in a process of its own: its CPU time is the server's and nothing else's.
    // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles it.
    const deployment = newDeployment(db.url, {
      NODE_ENV: 'production',
      KASSA_ALLOW_SANDBOX_IN_PRODUCTION: 'true',
      LOG_LEVEL: 'warn',
      DATABASE_POOL_MAX: '10',
      // DATABASE_PREPARED_STATEMENTS=false measures without named statements.
      ...(process.env.DATABASE_PREPARED_STATEMENTS ? { DATABASE_PREPARED_STATEMENTS: process.env.DATABASE_PREPARED_STATEMENTS } : {}),
    });
    const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean);
    server = await startKassa(deployment, { role: 'api', name: 'bench-agent', nodeArgs });
    const apiUrl = server.apiUrl;
    const adminApi = (path: string, body: unknown) =>
      http('POST', `${server!.adminUrl}${path}`, { headers: { Authorization: `Bearer ${deployment.adminToken}` }, body }).then((res) => {
        if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${res.text}`);
        return res.json.data;
      });
    // The server's own CPU time (its /metrics: process.cpuUsage, all its threads), in ms.
    const serverCpuMs = async () => {
      const text = await (await fetch(`${server!.adminUrl}/metrics`)).text();
      const read = (metric: string) => Number(new RegExp(`^kassa_${metric}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
      return { user: read('process_cpu_user_seconds_total'), system: read('process_cpu_system_seconds_total') };
    };

    const { orgId } = await adminApi('/v1/orgs', { name: 'Bench' });
    const wallet: { walletId: string; walletAddress: string } = await adminApi(`/v1/orgs/${orgId}/wallets`, { name: 'Bench' });
    const { agentWalletKey } = await adminApi(`/v1/orgs/${orgId}/agents`, { name: 'Bench agent', walletId: wallet.walletId });

    // BENCH_LOAD_NODE_ARGS="--cpu-prof --cpu-prof-dir=…" profiles the load generator.
    const loadNodeArgs = process.env.BENCH_LOAD_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
    const load = spawn(process.execPath, [...loadNodeArgs, '--import', 'tsx', fileURLToPath(import.meta.url), '--load'], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child = load;
    const exited = new Promise<never>((_, reject) => load.once('exit', (code) => reject(new Error(`load generator exited with ${code}`))));
    let cpuAtStart: Promise<{ user: number; system: number }> | undefined;
    let pgAtStart: number | null = null;
    const result = await Promise.race([
      exited,
      new Promise<LoadResult>((resolve) => {
        load.on('message', (message: LoadMessage) => {
          if (message.type === 'measuring') {
            cpuAtStart = serverCpuMs();
            void postgresCpuSeconds(admin, name).then((s) => (pgAtStart = s));
          } else resolve(message.result);
        });
        const job: LoadJob = {
          client: CLIENT,
          baseUrl: apiUrl,
          agentWalletKey: agentWalletKey!,
          walletAddress: wallet.walletAddress,
          concurrency: CONCURRENCY,
          warmupSeconds: WARMUP_SECONDS,
          durationSeconds: DURATION_SECONDS,
        };
        load.send(job);
      }),
    ]);
    const [cpuAtEnd, cpuBefore] = await Promise.all([serverCpuMs(), cpuAtStart!]);
    const serverCpu = { user: cpuAtEnd.user - cpuBefore.user, system: cpuAtEnd.system - cpuBefore.system };
    const pgAtEnd = await postgresCpuSeconds(admin, name);
    if (load.connected) load.disconnect();

    const direct = new pg.Client({ connectionString: db.url });
    await direct.connect();
    const signedRows = Number((await direct.query(`SELECT count(*) AS n FROM agent_wallet_history WHERE status = 'signed'`).finally(() => direct.end())).rows[0].n);
    if (result.signed === 0) throw new Error(`bench: nothing was signed (${result.firstFailure ?? 'no request made'})`);

    const floorOps = floor(FLOOR_ROUNDS);
    const rps = result.signed / result.seconds;
    const perRequest = (ms: number) => (ms / (result.signed + result.failed)).toFixed(2);
    const serverMs = serverCpu.user + serverCpu.system;
    const floorMs = 1000 / floorOps;
    const ratio = rps / floorOps;
    const cpuRatio = floorMs / (serverMs / (result.signed + result.failed));
    // What this machine allows at best: the route verifies two P-256 signatures (the request's
    // and the wallet authorization) and signs once, so a server doing nothing else spends a floor
    // operation plus one verification per request, and shares the cores with PostgreSQL and the
    // load generator, whose CPU per request is measured above.
    const verifyMs = 1000 / verifyAlone(FLOOR_ROUNDS);
    const pgMs = pgAtStart !== null && pgAtEnd !== null ? ((pgAtEnd - pgAtStart) * 1000) / (result.signed + result.failed) : null;
    const loadMs = result.cpuMs / (result.signed + result.failed);
    const cores = os.cpus().length;
    const bound = pgMs === null ? null : (cores * 1000) / (floorMs + verifyMs + pgMs + loadMs);
    const lines = [
      `bench:agent — POST ${SIGN_TYPED_DATA_PATH} on PostgreSQL: a Kassa API process serves (as npm start), the agent client loads from a third process (${
        CLIENT === 'sdk' ? 'createAgentClient' : "the client's signing helpers over node:http"
      })`,
      `  ${os.cpus().length} CPUs, concurrency ${CONCURRENCY}, ${DURATION_SECONDS} s measured after ${WARMUP_SECONDS} s warm-up, load average ${os.loadavg()[0]!.toFixed(1)} at the end`,
      `  signed requests/s:        ${rps.toFixed(1)}  (${result.signed} signed, ${result.failed} failed${result.firstFailure ? `: ${result.firstFailure}` : ''}; ${signedRows} signed history rows in all)`,
      `  latency:                  p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, max ${result.max.toFixed(1)} ms`,
      `  CPU ms per request:       server ${perRequest(serverMs)} (all threads; user ${perRequest(serverCpu.user)}, system ${perRequest(serverCpu.system)}), load generator ${perRequest(result.cpuMs)}, PostgreSQL ${
        pgAtStart !== null && pgAtEnd !== null ? perRequest((pgAtEnd - pgAtStart) * 1000) : 'n/a'
      }`,
      `  floor (P-256 verify + secp256k1 sign, one thread, per CPU second, best of ${FLOOR_ROUNDS} s): ${floorOps.toFixed(1)} ops/s (${floorMs.toFixed(3)} ms per op)`,
      `  ratio requests/floor:     ${ratio.toFixed(3)}  (target ≥ ${TARGET_RATIO}: ${ratio >= TARGET_RATIO ? 'met' : 'MISSED'})`,
      `  floor op / server CPU per request: ${cpuRatio.toFixed(3)}  (the ratio if the server had one core to itself)`,
      ...(bound === null
        ? []
        : [
            `  machine bound: a server spending only the route's own cryptography (${(floorMs + verifyMs).toFixed(3)} ms: the floor op + one more P-256 verify), ` +
              `with PostgreSQL ${pgMs!.toFixed(2)} and the load generator ${loadMs.toFixed(2)} ms per request on ${cores} cores: ${bound.toFixed(0)} req/s, a ratio of ${(bound / floorOps).toFixed(3)}`,
          ]),
      '',
    ];
    report(lines.join('\n'));
    const serverMsPerRequest = serverMs / (result.signed + result.failed);
    emit(
      summary('agent', {
        settings: { client: CLIENT, concurrency: CONCURRENCY, seconds: DURATION_SECONDS },
        figures: {
          requestsPerSecond: round(rps),
          p50Ms: round(result.p50),
          p99Ms: round(result.p99),
          serverCpuMsPerRequest: round(serverMsPerRequest),
          postgresCpuMsPerRequest: pgMs === null ? null : round(pgMs),
          loadGeneratorCpuMsPerRequest: round(loadMs),
          machineBoundRequestsPerSecond: bound === null ? null : round(bound),
        },
        floors: {
          floorOpsPerSecond: round(floorOps),
          floorOpMs: round(floorMs),
          routeCryptoMs: { what: 'the floor op (P-256 verify + secp256k1 sign) + one more P-256 verify, one thread', ms: round(floorMs + verifyMs) },
        },
        targets: [
          target('route crypto / server CPU per request', (floorMs + verifyMs) / serverMsPerRequest, 'ratio', 0.4, false),
          target('requests/s / floor ops/s', ratio, 'ratio', TARGET_RATIO, false),
        ],
      }),
    );
  } finally {
    child?.kill();
    await server?.stop();
    await admin.end();
    await db.drop();
  }
}

if (process.argv[2] === '--load') {
  process.once('message', (job: LoadJob) => {
    runLoad(job, (message) => process.send!(message)).catch((err) => {
      console.error(err);
      process.exit(1);
    });
  });
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
