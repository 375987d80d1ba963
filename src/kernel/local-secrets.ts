/**
 * Secrets a zero-setup install generates for itself into the data folder (mode 0600) when they
 * are not configured: the admin token and the at-rest encryption key. Production sets both.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from './startup-error.js';

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

/** The at-rest key, and where it came from in words for messages (never the key itself). */
export async function encryptionKeyFor(dataDir: string, configured: Buffer | undefined): Promise<{ key: Buffer; source: string }> {
  if (configured) return { key: configured, source: 'ENCRYPTION_KEY' };
  const file = path.join(dataDir, 'encryption-key');
  const { value, created } = await readOrCreate(dataDir, 'encryption-key', () => randomBytes(32).toString('base64'));
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new StartupError(`${file} must hold a 32-byte key, base64-encoded (openssl rand -base64 32), or set ENCRYPTION_KEY`);
  return { key, source: `The key in ${file} (ENCRYPTION_KEY is not set${created ? '; this start generated it' : ''})` };
}
