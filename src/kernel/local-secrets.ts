/**
 * Secrets a zero-setup install generates for itself into the data folder (mode 0600) when they
 * are not configured: the admin token and the at-rest encryption key. Production sets both.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

async function readOrCreate(dir: string, name: string, generate: () => string): Promise<{ value: string; created: boolean }> {
  const file = path.join(dir, name);
  try {
    return { value: (await readFile(file, 'utf8')).trim(), created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dir, { recursive: true });
  const value = generate();
  // 'wx' fails if another process created it first; then read theirs.
  try {
    await writeFile(file, `${value}\n`, { mode: 0o600, flag: 'wx' });
    return { value, created: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return { value: (await readFile(file, 'utf8')).trim(), created: false };
  }
}

export const ADMIN_TOKEN_FILE = 'admin-token';

export async function adminTokenFor(dataDir: string, configured: string | undefined): Promise<string> {
  if (configured) return configured;
  return (await readOrCreate(dataDir, ADMIN_TOKEN_FILE, () => `kadm_${randomBytes(32).toString('base64url')}`)).value;
}

export async function encryptionKeyFor(dataDir: string, configured: Buffer | undefined): Promise<Buffer> {
  if (configured) return configured;
  const { value } = await readOrCreate(dataDir, 'encryption-key', () => randomBytes(32).toString('base64'));
  return Buffer.from(value, 'base64');
}
