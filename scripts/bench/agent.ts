/**
 * `npm run bench:agent`: signed sign-typed-data requests per second through the whole stack
 * (HTTP, P-256 request authentication with replay memory, wallet authorization signature,
 * typed-data validation, policies, EIP-712 signing, history write) against PostgreSQL, compared
 * with a floor: one P-256 verification plus one secp256k1 signature in a bare loop, which is
 * the least cryptography any implementation of the route must do per request.
 *
 * Creates its own database on BENCH_DATABASE_URL's server (default
 * postgres://postgres@127.0.0.1:5432/postgres) and drops it afterwards.
 * BENCH_REQUESTS (default 600) and BENCH_CONCURRENCY (default 8) tune the run.
 */
import { randomBytes, sign, generateKeyPairSync, verify, createPublicKey } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import pg from 'pg';
import { generatePrivateKey, sign as secp256k1Sign } from 'viem/accounts';
import { loadConfig } from '../../src/config.js';
import { migrateLatest, openDatabase } from '../../src/db/knex.js';
import { systemClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { createServices } from '../../src/services.js';
import { createPlatformApp } from '../../src/apps.js';
import { createAgentClient } from '../../src/client/agent.js';
import { requestPayload } from '../../src/agent-wallet/protocol.js';

const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 600);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const WARMUP = 50;

function databaseUrlFor(name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** One P-256 verification + one secp256k1 signature, in a bare loop: operations per second. */
async function floor(seconds = 3): Promise<number> {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const key = createPublicKey({ key: publicKey.export({ type: 'spki', format: 'der' }), format: 'der', type: 'spki' });
  const payload = requestPayload('POST', '/v1/agent-wallet/sign-typed-data', '1763800000');
  const signature = sign('sha256', payload, privateKey);
  const walletKey = generatePrivateKey();
  let ops = 0;
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    if (!verify('sha256', payload, key, signature)) throw new Error('floor: verification failed');
    await secp256k1Sign({ hash: `0x${randomBytes(32).toString('hex')}`, privateKey: walletKey, to: 'hex' });
    ops++;
  }
  return ops / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const name = `kassa_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const database = await openDatabase({ databaseUrl: databaseUrlFor(name), poolMax: 10 });
  const http = createServer();
  try {
    await migrateLatest(database.db);
    const config = loadConfig({ NODE_ENV: 'production', LOG_LEVEL: 'silent', PUBLIC_API_URL: 'http://bench.local' }, []);
    const services = createServices({ db: database.db, clock: systemClock, secretBox: new SecretBox(randomBytes(32)), config });
    await services.signingKeys.ensureKey();
    const app = await createPlatformApp({
      config,
      database,
      clock: systemClock,
      logger: createLogger({ level: 'silent' }),
      services,
      adminToken: randomBytes(24).toString('hex'),
    });
    http.on('request', app);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const local = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

    const org = await services.orgs.createOrganization({ name: 'Bench' });
    const wallet = await services.agentWallet.createWallet(org.id, { name: 'Bench' });
    const { agentWalletKey } = await services.agentWallet.createAgent(org.id, { name: 'Bench agent', walletId: wallet.id });
    const client = createAgentClient({
      agentWalletKey: agentWalletKey!,
      baseUrl: config.publicApiUrl,
      fetch: async (request) =>
        fetch(request.url.replace(config.publicApiUrl, local), {
          method: request.method,
          headers: request.headers,
          body: request.method === 'GET' ? undefined : await request.text(),
        }),
    });
    const transfer = (i: number) => ({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primary_type: 'TransferWithAuthorization',
      message: {
        from: wallet.address,
        to: '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
        value: String(1_000_000 + i),
        validAfter: '0',
        validBefore: '4102444800',
        nonce: `0x${randomBytes(32).toString('hex')}`,
      },
    });

    const runBatch = async (count: number): Promise<number> => {
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < count) {
            const i = next++;
            await client.signTypedData(transfer(i));
          }
        }),
      );
      return count / ((performance.now() - started) / 1000);
    };

    await runBatch(WARMUP);
    const requestsPerSecond = await runBatch(REQUESTS);
    const history = await client.history({ limit: 1 });
    if (history[0]?.status !== 'signed') throw new Error('bench: the last request was not signed');
    const floorOps = await floor();

    const fmt = (n: number) => n.toFixed(1);
    process.stdout.write(
      [
        `agent wallet sign-typed-data on PostgreSQL (${cpus().length} CPUs, concurrency ${CONCURRENCY}, ${REQUESTS} requests after ${WARMUP} warm-up)`,
        `  signed requests/s:                     ${fmt(requestsPerSecond)}`,
        `  floor (P-256 verify + secp256k1 sign): ${fmt(floorOps)} ops/s`,
        `  ratio requests/floor:                  ${(requestsPerSecond / floorOps).toFixed(3)}`,
        '  (the client signs its headers and authorization in this same process, and shares its CPUs)',
        '',
      ].join('\n'),
    );
  } finally {
    await new Promise<void>((resolve) => (http.listening ? http.close(() => resolve()) : resolve()));
    await database.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
