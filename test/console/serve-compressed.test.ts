/**
 * The console's bundles are precompressed at build time (brotli and gzip beside each fingerprinted
 * file) and served by Accept-Encoding with `Vary: Accept-Encoding` and a year's immutable caching
 * (issue 37, item 18: the 220 KB script went out uncompressed).
 */
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConsole, CONSOLE_DIST_DIR } from '../../src/console/build.js';
import { acceptedEncodings, registerConsoleRoutes } from '../../src/console/serve.js';

let origin: string;
let close: () => Promise<void>;
let script: string;
let style: string;

/** A raw GET (no client-side decompression): status, headers and the bytes as sent. */
function get(pathname: string, acceptEncoding?: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(`${origin}${pathname}`, { headers: acceptEncoding === undefined ? {} : { 'Accept-Encoding': acceptEncoding } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('console bundles, precompressed', () => {
  beforeAll(async () => {
    ({ script, style } = await buildConsole());
    const app = express();
    const router = express.Router();
    registerConsoleRoutes(router);
    app.use(router);
    const server = createServer(app).listen(0, '127.0.0.1');
    await once(server, 'listening');
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise((r) => server.close(() => r()));
  });
  afterAll(async () => close?.());

  it('the build writes a brotli and a gzip copy of each bundle, each decoding to the bundle', async () => {
    for (const file of [script, style]) {
      const plain = await readFile(path.join(CONSOLE_DIST_DIR, file));
      expect(brotliDecompressSync(await readFile(path.join(CONSOLE_DIST_DIR, `${file}.br`))).equals(plain)).toBe(true);
      expect(gunzipSync(await readFile(path.join(CONSOLE_DIST_DIR, `${file}.gz`))).equals(plain)).toBe(true);
    }
  });

  it('sends brotli, gzip or the plain file by Accept-Encoding, always with Vary and immutable caching', async () => {
    const plain = await readFile(path.join(CONSOLE_DIST_DIR, script));
    const br = await get(`/console/${script}`, 'gzip, deflate, br, zstd');
    expect(br.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(br.body).equals(plain)).toBe(true);
    expect(br.body.length).toBeLessThan(plain.length / 3);
    const gz = await get(`/console/${script}`, 'gzip');
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.body).equals(plain)).toBe(true);
    const refused = await get(`/console/${script}`, 'br;q=0, gzip;q=0');
    expect(refused.headers['content-encoding']).toBeUndefined();
    expect(refused.body.equals(plain)).toBe(true);
    const none = await get(`/console/${script}`);
    expect(none.headers['content-encoding']).toBeUndefined();
    for (const answer of [br, gz, refused, none]) {
      expect(answer.status).toBe(200);
      expect(answer.headers['vary']).toBe('Accept-Encoding');
      expect(answer.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(answer.headers['content-type']).toBe('text/javascript; charset=utf-8');
    }
    const css = await get(`/console/${style}`, 'br');
    expect(css.headers['content-encoding']).toBe('br');
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    // The compressed copies are not addressable as files of their own.
    expect((await get(`/console/${script}.br`, 'br')).status).toBe(404);
  });

  it('reads Accept-Encoding with its weights', () => {
    expect([...acceptedEncodings('gzip, deflate, br')]).toEqual(['gzip', 'deflate', 'br']);
    expect(acceptedEncodings('br;q=0, gzip;q=0.5').has('br')).toBe(false);
    expect(acceptedEncodings('br;q=0, gzip;q=0.5').has('gzip')).toBe(true);
    expect(acceptedEncodings(undefined).size).toBe(0);
  });
});
