import { pino, type DestinationStream, type Logger } from 'pino';
import type { SecretValues } from './redaction.js';

export type { Logger };

/**
 * Paths pino blanks in every line: credentials must never reach a log, whatever logs them
 * (request headers, a config dump, an error carrying a request).
 */
export const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers["x-agent-signature"]',
  'headers["x-api-key"]',
  'headers.authorization',
  '*.apiKey',
  '*.key',
  '*.privateKey',
  '*.adminToken',
  '*.encryptionKey',
  '*.password',
];

export interface LoggerOptions {
  level: string;
  destination?: DestinationStream;
  /**
   * Secret values blanked wherever they appear in a line (messages and error texts included),
   * whatever field carries them; values registered after creation count too.
   */
  secretValues?: SecretValues;
}

export function createLogger(options: LoggerOptions = { level: 'info' }): Logger {
  const secrets = options.secretValues;
  return pino(
    {
      level: options.level,
      base: undefined,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      ...(secrets ? { hooks: { streamWrite: (line: string) => (secrets.size > 0 ? secrets.scrub(line) : line) } } : {}),
    },
    options.destination,
  );
}
