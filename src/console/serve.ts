/**
 * Serves the browser console under `/console/` on the merchant listener, from `web/dist/`
 * (src/console/build.ts): hashed assets for a year (`immutable`), precompressed at build time and
 * sent as brotli or gzip by the request's Accept-Encoding (`Vary: Accept-Encoding`), `index.html` for every other
 * path below `/console/` (the console routes in the browser, so a deep link such as
 * `/console/orders/ord_…` loads the same page), never cached, under a strict
 * Content-Security-Policy: scripts and styles only from this origin, no inline script, requests
 * only to this origin (the console talks to the documented API and nothing else).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { NextFunction, Request, Response, Router } from 'express';
import { CONSOLE_DIST_DIR, PRECOMPRESSED } from './build.js';

/**
 * The encodings of Accept-Encoding the client takes (q > 0), brotli preferred to gzip when both
 * are acceptable, as browsers send both and brotli is the smaller.
 */
export function acceptedEncodings(header: string | undefined): Set<string> {
  const accepted = new Set<string>();
  for (const item of (header ?? '').split(',')) {
    const [name, ...params] = item.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (name && !(q && Number(q.slice(2)) === 0)) accepted.add(name);
  }
  return accepted;
}

export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; font-src 'self'; connect-src 'self'; " +
  "manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const COMMON_HEADERS = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
};

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

const NOT_BUILT =
  '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Kassa console</title></head><body>' +
  '<h1>The console is not built</h1><p>Run <code>npm run build:console</code> (it runs on <code>npm install</code> and <code>npm start</code>).</p></body></html>';

export function registerConsoleRoutes(router: Router, options: { distDir?: string } = {}): void {
  const distDir = options.distDir ?? CONSOLE_DIST_DIR;
  const assetsDir = path.join(distDir, 'assets');
  // Express matches '/console' for '/console/' too (non-strict routing): only the bare path redirects.
  router.get('/console', (req, res, next) => (req.originalUrl.split('?')[0] === '/console' ? res.redirect(301, '/console/') : next()));
  router.get('/console/assets/:file', async (req: Request, res: Response, next: NextFunction) => {
    const file = String(req.params.file);
    const type = CONTENT_TYPES[path.extname(file)];
    // Only a plain file name of a known type: no traversal, nothing but the build's own files.
    if (!type || !/^[A-Za-z0-9._-]+$/.test(file) || file.startsWith('.')) return next();
    const headers = { ...COMMON_HEADERS, 'Content-Type': type, 'Cache-Control': 'public, max-age=31536000, immutable', Vary: 'Accept-Encoding' };
    const accepted = acceptedEncodings(req.header('accept-encoding'));
    for (const { encoding, suffix } of PRECOMPRESSED) {
      if (!accepted.has(encoding) && !accepted.has('*')) continue;
      const compressed = await readFile(path.join(assetsDir, file + suffix)).catch(() => undefined);
      // Sent as is: compression middleware (none here) must not encode it twice.
      if (compressed) return void res.set({ ...headers, 'Content-Encoding': encoding }).send(compressed);
    }
    let body: Buffer;
    try {
      body = await readFile(path.join(assetsDir, file));
    } catch {
      return next();
    }
    res.set(headers).send(body);
  });
  router.get(['/console/', '/console/{*rest}'], async (req: Request, res: Response) => {
    let html: string;
    try {
      html = await readFile(path.join(distDir, 'index.html'), 'utf8');
    } catch {
      res.status(503).set({ ...COMMON_HEADERS, 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' }).send(NOT_BUILT);
      return;
    }
    // A missing asset under /console/assets/ is a 404, not the page (a stale page asking for a removed bundle).
    const status = req.path.startsWith('/console/assets/') ? 404 : 200;
    res
      .status(status)
      .set({ ...COMMON_HEADERS, 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache', 'Content-Security-Policy': CONSOLE_CSP })
      .send(status === 404 ? 'Not found' : html);
  });
}
