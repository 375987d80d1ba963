/**
 * A test context: the three apps in-process on a fresh database, a manual clock, and two
 * isolated organizations (A and B) with a merchant API key each.
 */
import supertest from 'supertest';
import type { Express } from 'express';
import { loadConfig, type Config } from '../../src/config.js';
import { ManualClock } from '../../src/kernel/clock.js';
import { createLogger } from '../../src/kernel/logger.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { randomBytes } from 'node:crypto';
import { createServices, type Services } from '../../src/services.js';
import { createAdminApp, createMerchantApp, createPlatformApp, type AppDeps } from '../../src/apps.js';
import { freshDatabase, type TestDatabase } from './database.js';

export interface TestOrg {
  orgId: string;
  apiKey: string;
  apiKeyId: string;
}

export interface TestContext {
  config: Config;
  clock: ManualClock;
  services: Services;
  deps: AppDeps;
  testDb: TestDatabase;
  apps: { merchant: Express; platform: Express; admin: Express };
  merchant: supertest.Agent;
  platform: supertest.Agent;
  admin: supertest.Agent;
  adminToken: string;
  orgA: TestOrg;
  orgB: TestOrg;
  close(): Promise<void>;
}

export interface TestContextOptions {
  env?: Record<string, string>;
  /** Where log lines go (tests that inspect logs pass a collecting stream). */
  logDestination?: { write(line: string): void };
}

export async function createTestContext(options: TestContextOptions = {}): Promise<TestContext> {
  const env = options.env ?? {};
  const testDb = await freshDatabase();
  const config = loadConfig(
    {
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
      PUBLIC_BASE_URL: 'http://merchant.test',
      PUBLIC_API_URL: 'http://api.test',
      // Every request of a test comes from one address within one frozen minute; the hosted-page
      // limits have their own tests (test/checkout/hosted-rate-limit.test.ts).
      HOSTED_RATE_LIMIT_PER_MINUTE: '0',
      HOSTED_WRITE_RATE_LIMIT_PER_MINUTE: '0',
      ...env,
    },
    [],
  );
  const clock = new ManualClock('2026-11-22T09:00:00.000Z');
  const logger = createLogger({ level: config.logLevel, destination: options.logDestination });
  const services = createServices({ db: testDb.database.db, clock, secretBox: new SecretBox(randomBytes(32)), config, logger });
  await services.signingKeys.ensureKey();
  const adminToken = `kadm_test_${randomBytes(16).toString('hex')}`;
  const deps: AppDeps = { config, database: testDb.database, clock, logger, services, adminToken };
  const apps = {
    merchant: await createMerchantApp(deps),
    platform: await createPlatformApp(deps),
    admin: await createAdminApp(deps),
  };
  const seedOrg = async (name: string): Promise<TestOrg> => {
    const org = await services.orgs.createOrganization({ name });
    const key = await services.orgs.createApiKey(org.id, { name: 'test' });
    return { orgId: org.id, apiKey: key.key, apiKeyId: key.id };
  };
  const orgA = await seedOrg('Org A');
  const orgB = await seedOrg('Org B');
  return {
    config,
    clock,
    services,
    deps,
    testDb,
    apps,
    merchant: supertest.agent(apps.merchant),
    platform: supertest.agent(apps.platform),
    admin: supertest.agent(apps.admin).set('Authorization', `Bearer ${adminToken}`),
    adminToken,
    orgA,
    orgB,
    close: () => testDb.drop(),
  };
}
