/**
 * The encryption key check (src/encryption-key/): recorded at the first start, verified at every
 * start, and on a database from before it, recorded only when the key opens every sealed key the
 * database holds. Several processes starting at once with different keys: exactly one key wins.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/kernel/clock.js';
import { SecretBox } from '../../src/kernel/secrets.js';
import { StartupError } from '../../src/kernel/startup-error.js';
import { createServices } from '../../src/services.js';
import { KnexKeyCheckRepository } from '../../src/encryption-key/key-check.repository.js';
import { verifyEncryptionKey } from '../../src/encryption-key/key-check.service.js';
import { freshDatabase, type TestDatabase } from '../harness/database.js';

let testDb: TestDatabase;
const clock = new ManualClock();
const newBox = () => new SecretBox(randomBytes(32));
const verify = (box: SecretBox) => verifyEncryptionKey({ repo: new KnexKeyCheckRepository(testDb.database.db), box, clock, keySource: 'ENCRYPTION_KEY' });
const checkRows = async () => Number((await testDb.database.db('encryption_key_check').count({ n: '*' }))[0]!.n);

beforeAll(async () => {
  testDb = await freshDatabase();
});
afterAll(async () => {
  await testDb?.drop();
});
beforeEach(async () => {
  const db = testDb.database.db;
  await db('encryption_key_check').delete();
  await db('agent_wallets').delete();
  await db('webhook_signing_keys').delete();
});

/** A signing key and a wallet key, each sealed with its own box, as the services seal them. */
async function sealSecrets(signingBox: SecretBox, walletBox: SecretBox): Promise<void> {
  await createServices({ db: testDb.database.db, clock, secretBox: signingBox }).signingKeys.ensureKey();
  const walletServices = createServices({ db: testDb.database.db, clock, secretBox: walletBox });
  const org = await walletServices.orgs.createOrganization({ name: 'Key check' });
  await walletServices.agentWallet.admin.createWallet(org.id, { name: 'sealed' });
}

describe('encryption key check', () => {
  it('is recorded at the first start and verified at the next; another key is refused, naming its source', async () => {
    const box = newBox();
    expect(await verify(box)).toBe('recorded');
    expect(await verify(box)).toBe('verified');
    const other = verify(newBox());
    await expect(other).rejects.toThrow(StartupError);
    await expect(other).rejects.toThrow('ENCRYPTION_KEY does not match the key that sealed this database');
    expect(await checkRows()).toBe(1);
  });

  it('a database from before the check: the key that opens all its sealed keys is recorded, another is refused and nothing is written', async () => {
    const sealing = newBox();
    await sealSecrets(sealing, sealing);
    await expect(verify(newBox())).rejects.toThrow('ENCRYPTION_KEY does not match the key that sealed this database');
    expect(await checkRows()).toBe(0);
    expect(await verify(sealing)).toBe('recorded');
    expect(await verify(sealing)).toBe('verified');
  });

  it('a database whose sealed keys were sealed with different keys: no key is recorded, the message gives the counts', async () => {
    const [signing, wallet] = [newBox(), newBox()];
    await sealSecrets(signing, wallet);
    await expect(verify(signing)).rejects.toThrow('ENCRYPTION_KEY opens only 1 of the 2 sealed keys in this database (webhook signing keys: 1 of 1, agent wallet keys: 0 of 1)');
    await expect(verify(wallet)).rejects.toThrow('(webhook signing keys: 0 of 1, agent wallet keys: 1 of 1)');
    expect(await checkRows()).toBe(0);
  });

  it('processes starting together with different keys on a new database: exactly one key is recorded, every other is refused', async () => {
    const ROUNDS = 25;
    const PROCESSES = 6;
    for (let round = 0; round < ROUNDS; round++) {
      await testDb.database.db('encryption_key_check').delete();
      const boxes = Array.from({ length: PROCESSES }, newBox);
      const results = await Promise.allSettled(boxes.map((box) => verify(box)));
      const winners = results.flatMap((result, i) => (result.status === 'fulfilled' ? [i] : []));
      expect(winners, `round ${round}`).toHaveLength(1);
      for (const result of results) if (result.status === 'rejected') expect(String(result.reason)).toContain('does not match the key that sealed this database');
      // The recorded value is the winner's: it verifies, every other key is still refused.
      expect(await verify(boxes[winners[0]!]!)).toBe('verified');
      expect(await checkRows()).toBe(1);
    }
  });
});
