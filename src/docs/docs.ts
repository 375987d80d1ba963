/**
 * The published contract: the bundled OpenAPI documents at `/openapi/<name>.yaml|json` and the
 * rendered reference at `/docs` on each listener. The HTML is rendered ahead of time by
 * `npm run docs` (Redocly, inlined bundle: no network at view time) into `docs-dist/`; a
 * listener never renders at request time (Redoc's server-side render takes seconds of CPU per
 * document), so an unbuilt `docs-dist/` is answered with a page that says how to build it.
 */
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NextFunction, Request, Response, Router } from 'express';
import YAML from 'yaml';
import { bundleDocument, loadDocument, type DocumentName } from '../http/spec.js';

export const DOCS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs-dist');
export const DOCUMENT_NAMES: readonly DocumentName[] = ['merchant', 'telemetry', 'agent-wallet', 'admin', 'console'];

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export interface PublishedDocument {
  yaml: string;
  json: string;
}

const published = new Map<DocumentName, Promise<PublishedDocument>>();

/**
 * The bundled document (external component files pulled in), serialized once per process on
 * first use: bundling the merchant document takes ~1 s, too slow to pay at every app start
 * (tests build dozens of apps) and pointless to repeat.
 */
export function publishedDocument(name: DocumentName): Promise<PublishedDocument> {
  let entry = published.get(name);
  if (!entry) {
    entry = bundleDocument(name).then((doc) => ({ yaml: YAML.stringify(doc, { aliasDuplicateObjects: false }), json: JSON.stringify(doc, null, 2) }));
    // A failed bundle (a broken file on disk) is retried on the next request, not cached.
    entry.catch(() => published.delete(name));
    published.set(name, entry);
  }
  return entry;
}

export interface DocsRoutesOptions {
  /** Documents this listener serves (its own contract). */
  documents: readonly DocumentName[];
  /** Rendered HTML (`npm run docs`); defaults to `docs-dist/` at the repository root. */
  docsDir?: string;
  /** Documents served by the other public listener, linked from the index (`{api_url}/docs/telemetry`). */
  elsewhere?: ReadonlyArray<{ name: DocumentName; baseUrl: string }>;
}

const PAGE_STYLE =
  'body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f4f5f7}' +
  'main{max-width:760px;margin:0 auto;padding:32px 16px}h1{margin:0 0 8px}li{margin:10px 0}' +
  '.muted{color:#667085}code{background:#eaecf0;padding:1px 5px;border-radius:4px}a{color:#4338ca}';

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head><body><main>${body}</main></body></html>`;
}

async function titleOf(name: DocumentName): Promise<{ title: string; summary: string }> {
  const info = (await loadDocument(name)).info as { title?: string; summary?: string };
  return { title: info.title ?? name, summary: info.summary ?? '' };
}

/**
 * The index page, used both by the listeners (`/docs`) and by `npm run docs` (`index.html`).
 * `href(name)` says where a document's rendered page lives; `raw(name)` where its files do;
 * `built: false` marks a document whose page `npm run docs` has not rendered yet.
 */
export async function renderIndex(entries: ReadonlyArray<{ name: DocumentName; href: string; raw?: string; built?: boolean }>): Promise<string> {
  const items = await Promise.all(
    entries.map(async ({ name, href, raw, built }) => {
      const { title, summary } = await titleOf(name);
      const files = raw ? ` · <a href="${escapeHtml(raw)}.yaml">YAML</a> · <a href="${escapeHtml(raw)}.json">JSON</a>` : '';
      const state = built === false ? ' <span class="muted" data-testid="not-built">(page not built)</span>' : '';
      return `<li><a href="${escapeHtml(href)}"><strong>${escapeHtml(title)}</strong></a>${state}${files}${summary ? `<br><span class="muted">${escapeHtml(summary)}</span>` : ''}</li>`;
    }),
  );
  const intro = entries.some((entry) => entry.built === false)
    ? '<p data-testid="intro">The reference pages are not built yet: run <code>npm run docs</code> in the Kassa directory (it renders them offline into <code>docs-dist/</code>) and reload this page. The OpenAPI 3.1 documents themselves, the source of truth of every request and response, are served now as YAML and JSON.</p>'
    : '<p class="muted" data-testid="intro">Rendered from the OpenAPI 3.1 documents in <code>openapi/</code>, the source of truth of every request and response.</p>';
  return page('Kassa API reference', `<h1>Kassa API reference</h1>${intro}<ul>${items.join('')}</ul>`);
}

function notBuiltPage(name: DocumentName): string {
  return page(
    'Kassa API reference not built',
    `<h1>The API reference is not built</h1><p>Run <code>npm run docs</code> in the Kassa directory (it renders every document into <code>docs-dist/</code>, offline) and reload this page.</p><p>The document itself is served as it is: <a href="/openapi/${name}.yaml">/openapi/${name}.yaml</a> · <a href="/openapi/${name}.json">/openapi/${name}.json</a>.</p>`,
  );
}

/**
 * The reference pages' Content-Security-Policy: nothing is fetched from elsewhere, and only the
 * page's own inline scripts run (allowed by their hashes, so an injected script never does). Redoc
 * styles its components inline and runs its search index in a blob: worker.
 */
export function docsContentSecurityPolicy(html: string): string {
  const hashes = [...html.matchAll(/<script(?![^>]*\ssrc=)[^>]*>([\s\S]*?)<\/script>/g)].map((m) => `'sha256-${createHash('sha256').update(m[1]!, 'utf8').digest('base64')}'`);
  return [
    "default-src 'none'",
    `script-src ${hashes.length > 0 ? hashes.join(' ') : "'none'"}`,
    "style-src 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    'worker-src blob:',
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

const exists = (file: string) =>
  stat(file).then(
    (s) => s.isFile(),
    () => false,
  );

export function registerDocsRoutes(router: Router, options: DocsRoutesOptions): void {
  const docsDir = options.docsDir ?? DOCS_DIR;
  const served = new Set<string>(options.documents);

  const html = (res: Response, status: number, body: string) => {
    res.status(status).type('html').setHeader('Cache-Control', 'no-cache');
    res.setHeader('Content-Security-Policy', docsContentSecurityPolicy(body));
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.send(body);
  };

  // Built per request (a stat per document): the index must say so once `npm run docs` has run.
  router.get(['/docs', '/docs/'], async (_req: Request, res: Response, next: NextFunction) => {
    try {
      const local = await Promise.all(
        options.documents.map(async (name) => ({ name, href: `/docs/${name}`, raw: `/openapi/${name}`, built: await exists(path.join(docsDir, `${name}.html`)) })),
      );
      const remote = (options.elsewhere ?? []).map(({ name, baseUrl }) => ({ name, href: `${baseUrl}/docs/${name}`, raw: `${baseUrl}/openapi/${name}` }));
      html(res, 200, await renderIndex([...local, ...remote]));
    } catch (err) {
      next(err);
    }
  });

  router.get('/docs/:name', async (req: Request, res: Response, next: NextFunction) => {
    const name = String(req.params.name).replace(/\.html$/, '');
    if (!served.has(name)) return next();
    try {
      const file = path.join(docsDir, `${name}.html`);
      if (await exists(file)) html(res, 200, await readFile(file, 'utf8'));
      else html(res, 404, notBuiltPage(name as DocumentName));
    } catch (err) {
      next(err);
    }
  });

  router.get('/openapi/:file', async (req: Request, res: Response, next: NextFunction) => {
    const match = /^(.+)\.(yaml|json)$/.exec(String(req.params.file));
    if (!match || !served.has(match[1]!)) return next();
    try {
      const doc = await publishedDocument(match[1] as DocumentName);
      res.setHeader('Cache-Control', 'no-cache');
      // Any origin may fetch the contract (code generators, hosted viewers); it holds no secret.
      res.setHeader('Access-Control-Allow-Origin', '*');
      if (match[2] === 'yaml') res.type('application/yaml').send(doc.yaml);
      else res.type('application/json').send(doc.json);
    } catch (err) {
      next(err);
    }
  });
}
