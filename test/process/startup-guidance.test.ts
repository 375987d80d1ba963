/**
 * What a start tells the operator to do next (`src/main.ts` as a real child process): the demo
 * key once on a fresh embedded database, then on later starts the organization id and the CLI
 * command that makes a new key (never the key again); on PostgreSQL, where no demo organization
 * is created, how to create one.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { migratedDataDir, migratedDatabase } from '../harness/migrated-data-dir.js';
import { newDeployment, provisionMerchant, startKassa, waitFor, type KassaProcess, type StartOptions, type ThrowAwayDatabase } from '../../tools/cluster.js';

const serverUrl = process.env.TEST_DATABASE_URL;

/**
 * Starts Kassa, waits until it printed `expected`, stops it and returns everything it printed.
 * These starts do not wait for readiness (startKassa's retry on a lost port needs it): a child that
 * exits because another process took its port (ports are chosen free, not held) is started again
 * on fresh ports; any other exit fails at once, with its output.
 */
async function startUntil(start: () => Promise<KassaProcess>, expected: RegExp): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const proc = await start();
    let exited = false;
    try {
      await waitFor(`the start to print ${expected}`, async () => {
        if (expected.test(proc.output())) return true;
        exited = proc.child.exitCode !== null;
        return exited;
      }, 120_000, 100);
    } finally {
      await proc.stop();
    }
    if (!exited) return proc.output();
    if (attempt < 5 && /is already in use by another process/.test(proc.output())) continue;
    throw new Error(`exited with ${proc.child.exitCode}: ${proc.output().slice(-2000)}`);
  }
}

// The embedded database is used by the child processes whatever the suite runs on: once is enough.
describe.skipIf(serverUrl !== undefined)(skippedUnless('start-up guidance on the embedded database', 'embeddedOnly'), () => {
  const deployment = newDeployment('');
  let dataDir: string;
  const start = (env: Record<string, string> = {}) => () =>
    startKassa(deployment, { role: 'all', waitReady: false, env: { DATABASE_URL: '', ENCRYPTION_KEY: '', DATA_DIR: dataDir, ...env } } satisfies StartOptions);

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'kassa-greet-'));
  });
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('first start prints the demo key once; the second reminds of the org id and how to make a new key, without the key', async () => {
    const first = await startUntil(start({ KASSA_SEED_DEMO: 'true' }), /\/console\/sign-in-link#token=ksil_\S+/);
    const orgId = /orgId: +(ORG_\w+)/.exec(first)![1]!;
    const apiKey = /API key: (ak_\S+)/.exec(first)![1]!;
    // The demo owner's one-time console sign-in link (development, embedded database only).
    const signInLink = /(http\S+\/console\/sign-in-link#token=ksil_[A-Za-z0-9_-]{43})/.exec(first)![1]!;
    expect(first).toContain('one-time sign-in link for the demo owner');

    const second = await startUntil(start({ KASSA_SEED_DEMO: 'true' }), /Kassa organization: ORG_/);
    expect(second).toContain(`Kassa organization: ${orgId} (Demo organization)`);
    expect(second).toContain(`npm run -s admin -- apikey create --org ${orgId} --name backend`);
    expect(second).not.toContain(apiKey);
    expect(second).not.toContain('API key:');
    expect(second).not.toContain(signInLink.split('#token=')[1]!);
    expect(second).not.toContain('sign-in link');
  }, 300_000);

  it('with KASSA_SEED_DEMO=false on an empty database, says how to create an organization', async () => {
    // No organization in it; migrated already (the first start is the case above).
    const emptyDir = await migratedDataDir('kassa-greet-empty-');
    try {
      const output = await startUntil(() => startKassa(deployment, { role: 'all', waitReady: false, env: { DATABASE_URL: '', ENCRYPTION_KEY: '', DATA_DIR: emptyDir, KASSA_SEED_DEMO: 'false' } }), /no organization yet/);
      expect(output).toContain('Kassa has no organization yet (KASSA_SEED_DEMO=false)');
      expect(output).toContain('npm run -s admin -- org create --name "My shop"');
      expect(output).not.toContain('API key:');
    } finally {
      await rm(emptyDir, { recursive: true, force: true });
    }
  }, 300_000);
});

describe.skipIf(!serverUrl)(skippedUnless('start-up guidance on PostgreSQL', 'postgresOnly'), () => {
  let database: ThrowAwayDatabase;
  beforeAll(async () => {
    // Migrated, no organization: what the guidance reads.
    database = await migratedDatabase(serverUrl!, 'kassa_greet');
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('says no demo organization is created and how to make one; later names the organization, or how to list several', async () => {
    const deployment = newDeployment(database.url);
    // KASSA_SEED_DEMO's default: the demo is an embedded-database convenience only.
    const start = () => startKassa(deployment, { role: 'all', waitReady: false, env: { KASSA_SEED_DEMO: 'true' } });
    const empty = await startUntil(start, /no organization yet/);
    expect(empty).toContain('Kassa has no organization yet (the demo organization is only created on the embedded database)');
    expect(empty).toContain('npm run -s admin -- org create --name "My shop"');
    expect(empty).not.toContain('API key:');

    const proc = await startKassa(deployment, { role: 'all' });
    let org: { orgId: string; apiKey: string };
    try {
      org = await provisionMerchant(proc.adminUrl, deployment.adminToken, 'Corner shop');
    } finally {
      await proc.stop();
    }
    const one = await startUntil(start, /Kassa organization: ORG_/);
    expect(one).toContain(`Kassa organization: ${org.orgId} (Corner shop)`);
    expect(one).toContain(`npm run -s admin -- apikey create --org ${org.orgId} --name backend`);
    expect(one).not.toContain(org.apiKey);

    const again = await startKassa(deployment, { role: 'all' });
    try {
      await provisionMerchant(again.adminUrl, deployment.adminToken, 'Second shop');
    } finally {
      await again.stop();
    }
    const two = await startUntil(start, /Kassa has 2 organizations/);
    expect(two).toContain('npm run -s admin -- org list');
  }, 300_000);
});
