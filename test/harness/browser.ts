/**
 * Headless Chromium for the browser tests (Debian's chromium, driven by playwright-core). Chromium's background services are off: this machine
 * has no network, and their connections would be refused many at a time.
 */
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** Without Chromium the browser tests are skipped, except in CI, where .ci/run installs it. */
export const chromiumAvailable = existsSync(CHROMIUM);
if (!chromiumAvailable && process.env.CI) throw new Error(`CI needs Chromium at ${CHROMIUM} (.ci/run installs it with apt-get)`);

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Serves an app on a free loopback port for the browser: its origin, and how to stop it. */
export async function serveOnLoopback(app: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ origin: string; close(): Promise<void> }> {
  const server = createServer(app).listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
