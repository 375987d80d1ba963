import { pino, type DestinationStream, type Logger } from 'pino';

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

export function createLogger(options: { level: string; destination?: DestinationStream } = { level: 'info' }): Logger {
  return pino(
    {
      level: options.level,
      base: undefined,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    options.destination,
  );
}
