/**
 * The only reader of process.env. Bad configuration fails at start with a message that names
 * the variable, never later at request time.
 */
import path from 'node:path';

export type Role = 'api' | 'worker' | 'all';

export interface Config {
  nodeEnv: string;
  role: Role;
  host: string;
  merchantPort: number;
  apiPort: number;
  adminPort: number;
  adminHost: string;
  publicBaseUrl: string;
  publicApiUrl: string;
  /** PostgreSQL connection string; unset → embedded PGlite in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  /** Bearer token of the admin API; unset → generated into `<dataDir>/admin-token`. */
  adminToken: string | undefined;
  /** 32-byte key for secrets at rest (base64); unset → generated into `<dataDir>/encryption-key`. */
  encryptionKey: Buffer | undefined;
  logLevel: string;
  /** Create a demo organization and key on first start with an empty embedded database. */
  seedDemo: boolean;
  trustProxy: boolean;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function port(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) throw new ConfigError(`${name} must be a port number 0-65535, got "${raw}"`);
  return value;
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got "${env[name]}"`);
}

function url(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`);
  }
  if (!['http:', 'https:'].includes(parsed.protocol)) throw new ConfigError(`${name} must be http(s), got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

export function loadConfig(env: Env = process.env, argv: string[] = process.argv.slice(2)): Config {
  const roleFlag = argv.indexOf('--role');
  const role = (roleFlag >= 0 ? argv[roleFlag + 1] : env.KASSA_ROLE) || 'all';
  if (!['api', 'worker', 'all'].includes(role)) throw new ConfigError(`--role / KASSA_ROLE must be api, worker or all, got "${role}"`);
  const merchantPort = port(env, 'MERCHANT_PORT', 3000);
  const apiPort = port(env, 'API_PORT', 3001);
  let encryptionKey: Buffer | undefined;
  if (env.ENCRYPTION_KEY) {
    encryptionKey = Buffer.from(env.ENCRYPTION_KEY, 'base64');
    if (encryptionKey.length !== 32) throw new ConfigError('ENCRYPTION_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32)');
  }
  if (env.ADMIN_TOKEN !== undefined && env.ADMIN_TOKEN.length < 24) {
    throw new ConfigError('ADMIN_TOKEN must be at least 24 characters');
  }
  if (env.DATABASE_URL && !/^postgres(ql)?:\/\//.test(env.DATABASE_URL)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// connection string');
  }
  return {
    nodeEnv: env.NODE_ENV || 'development',
    role: role as Role,
    host: env.HOST || '0.0.0.0',
    merchantPort,
    apiPort,
    adminPort: port(env, 'ADMIN_PORT', 3002),
    adminHost: env.ADMIN_HOST || '127.0.0.1',
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL', `http://localhost:${merchantPort}`),
    publicApiUrl: url(env, 'PUBLIC_API_URL', `http://localhost:${apiPort}`),
    databaseUrl: env.DATABASE_URL || undefined,
    dataDir: path.resolve(env.DATA_DIR || './data'),
    adminToken: env.ADMIN_TOKEN || undefined,
    encryptionKey,
    logLevel: env.LOG_LEVEL || 'info',
    seedDemo: bool(env, 'KASSA_SEED_DEMO', true),
    trustProxy: bool(env, 'TRUST_PROXY', false),
  };
}
