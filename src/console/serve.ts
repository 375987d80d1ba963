/**
 * Serves the browser console under `/console/` on the merchant listener, from `web/dist/`
 * (src/console/build.ts): hashed assets for a year (`immutable`), `index.html` for every other
 * path below `/console/` (the console routes in the browser, so a deep link such as
 * `/console/orders/ord_…` loads the same page), never cached, under a strict
 * Content-Security-Policy: scripts and styles only from this origin, no inline script, requests
 * only to this origin (the console talks to the documented API and nothing else).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { NextFunction, Request, Response, Router } from 'express';
import { CONSOLE_DIST_DIR } from './build.js';

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
    let body: Buffer;
    try {
      body = await readFile(path.join(assetsDir, file));
    } catch {
      return next();
    }
    res.set({ ...COMMON_HEADERS, 'Content-Type': type, 'Cache-Control': 'public, max-age=31536000, immutable' }).send(body);
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
