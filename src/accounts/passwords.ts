/**
 * Password hashing: argon2id through @node-rs/argon2 (a maintained Rust binding with prebuilt
 * binaries, run off the event loop), with OWASP's minimum parameters for argon2id: 19 MiB of
 * memory, 2 passes, 1 lane. The PHC string stores the parameters, so raising them later only
 * changes new hashes; verification reads each hash's own. The library compares in constant time.
 */
import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

/** `algorithm: 2` is the library's const enum Algorithm.Argon2id (a const enum cannot be imported under verbatimModuleSyntax). */
export const ARGON2ID = { algorithm: 2 as const, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD_LENGTH = 12;
export const MAX_PASSWORD_LENGTH = 256;

export const hashPassword = (password: string): Promise<string> => hash(password, ARGON2ID);

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    // A malformed stored hash never signs anyone in.
    return false;
  }
}

let dummy: Promise<string> | undefined;
/**
 * A hash of nothing anyone knows, verified when the e-mail address is unknown (or the user has no
 * password yet), so that answer costs the same time as a wrong password: no user enumeration.
 */
export const dummyHash = (): Promise<string> => (dummy ??= hashPassword(randomBytes(32).toString('base64url')));
