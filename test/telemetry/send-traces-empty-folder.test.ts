/**
 * docs/send-traces.md's Node steps, run as a new user runs them (issue 27 item 11): in an empty
 * temporary folder, every `sh` block of the page's Node section in order with bash (`npm init`,
 * `npm pkg set type=module`, `npm install …`, `npx tsx …`), every `ts` block saved under the name
 * the page tells the reader to save it as; then the traces must be in Kassa (the platform app on
 * a loopback port, the page's `http://localhost:3001` pointed at it).
 *
 * The page's `npm install <packages>` lines are the one step not run as written: an install
 * resolves versions from the npm registry and unpacks hundreds of files, which is the network and
 * most of the CPU of this test. Instead each named package must be a dependency of the repository
 * (so its lockfile pins it and `npm ci` installed it), and the folder gets a `node_modules` link to
 * the repository's: the same packages the examples' own tests run on. Every other line runs with
 * bash as written; the repository's node_modules/.bin is taken off PATH, so `npx tsx` runs the tsx
 * the folder's node_modules holds.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { skippedUnless } from '../harness/skip-reasons.js';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer, createProjectWithKey, type TelemetryKeyFixture } from './helpers.js';
import { serveRecording, type RecordingServer } from './otlp-server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DOCUMENTED_API_URL = 'http://localhost:3001';

let ctx: TestContext;
let p: TelemetryKeyFixture;
let kassa: RecordingServer;
let openai: Server;
let openaiOrigin: string;
let tmp: string;

/** One code block of the page with the prose before it (since the previous block). */
interface Block {
  lang: string;
  code: string;
  prose: string;
}

/** The `## Node` section's code blocks, in order. */
export function nodeSectionBlocks(page: string): Block[] {
  const start = page.indexOf('\n## Node\n');
  const end = page.indexOf('\n## ', start + 1);
  expect(start, 'docs/send-traces.md has a "## Node" section').toBeGreaterThan(0);
  const section = page.slice(start, end < 0 ? undefined : end);
  const blocks: Block[] = [];
  let last = 0;
  for (const match of section.matchAll(/```([a-z]*)\n([\s\S]*?)```/g)) {
    blocks.push({ lang: match[1]!, code: match[2]!, prose: section.slice(last, match.index) });
    last = match.index! + match[0].length;
  }
  return blocks;
}

/** Answers POST /v1/chat/completions as the OpenAI API does (OpenLLMetry's example calls it). */
async function startOpenAiShapedServer(): Promise<void> {
  openai = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":{"message":"not found"}}');
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-local',
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: 'gpt-4o-2024-08-06',
          choices: [{ index: 0, message: { role: 'assistant', content: 'It ships today.', refusal: null }, logprobs: null, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1200, completion_tokens: 350, total_tokens: 1550 },
        }),
      );
    });
  }).listen(0, '127.0.0.1');
  await once(openai, 'listening');
  openaiOrigin = `http://127.0.0.1:${(openai.address() as AddressInfo).port}`;
}

/** Kassa runs here on the embedded database whatever TEST_DATABASE_URL says (as a new user's first start), so the PostgreSQL run would repeat it unchanged. */
const embeddedOnly = process.env.TEST_DATABASE_URL !== undefined;

beforeAll(async () => {
  if (embeddedOnly) return;
  ctx = await createTestContext();
  p = await createProjectWithKey(ctx, ctx.orgA.orgId);
  kassa = await serveRecording(ctx.apps.platform);
  await startOpenAiShapedServer();
  tmp = await mkdtemp(path.join(os.tmpdir(), 'kassa-send-traces-'));
});
afterAll(async () => {
  if (embeddedOnly) return;
  await kassa?.close();
  await new Promise((resolve) => (openai ? openai.close(resolve) : resolve(undefined)));
  await ctx?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

/** A user's shell: no OTel/Traceloop/OpenAI settings, no npm script context, no repository binaries. */
function userEnvironment(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(OTEL_|TRACELOOP_|OPENAI_|npm_|INIT_CWD$|NODE_OPTIONS$|VITEST|TEST_)/i.test(k)),
  ) as NodeJS.ProcessEnv;
  env.PATH = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !dir.split(path.sep).includes('node_modules'))
    .join(path.delimiter);
  return {
    ...env,
    npm_config_prefer_offline: 'true',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    npm_config_update_notifier: 'false',
    KASSA_TELEMETRY_KEY: p.key,
    // The reader's own OpenAI key (the page asks for it exported); the call goes to a local OpenAI-shaped server.
    OPENAI_API_KEY: 'sk-local-test',
    OPENAI_BASE_URL: `${openaiOrigin}/v1`,
  };
}

/**
 * A line `npm install <names>` of the page, replaced by a shell command that links the repository's
 * node_modules into the folder it runs in (see the header); fails when a name is not a dependency.
 */
export function installFromRepository(line: string, dependencies: Record<string, string>): string {
  const names = line.trim().split(/\s+/).slice(2);
  expect(names.length, `an install with packages: ${line}`).toBeGreaterThan(0);
  for (const name of names) expect(dependencies, `the page installs ${name}; the repository must depend on it`).toHaveProperty([name]);
  const modules = JSON.stringify(path.join(ROOT, 'node_modules'));
  return `[ -e node_modules ] || ln -s ${modules} node_modules`;
}

let repositoryDependencies: Record<string, string> | undefined;

/** Runs one `sh` block with bash in `cwd`; returns its stdout and the directory it ended in. */
async function runShell(code: string, cwd: string): Promise<{ stdout: string; cwd: string }> {
  const cwdFile = path.join(tmp, '.cwd');
  if (!repositoryDependencies) {
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
    repositoryDependencies = { ...pkg.dependencies, ...pkg.devDependencies };
  }
  const lines = code.split('\n').map((line) => (/^npm install\s/.test(line.trim()) ? installFromRepository(line, repositoryDependencies!) : line));
  const script = `set -e\n${lines.join('\n').replaceAll(DOCUMENTED_API_URL, kassa.origin)}\npwd > ${JSON.stringify(cwdFile)}\n`;
  const child = spawn('bash', ['-c', script], { cwd, env: userEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 280_000);
  const [exitCode] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  expect(exitCode, `this block failed:\n${code}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`).toBe(0);
  return { stdout, cwd: (await readFile(cwdFile, 'utf8')).trim() };
}

describe.skipIf(embeddedOnly)(skippedUnless("docs/send-traces.md's Node steps, in an empty folder, as written", 'embeddedOnly'), () => {
  it('npm init, ESM, the listed packages, tsx: both examples run and their traces are in Kassa', { timeout: 900_000 }, async () => {
    const page = await readFile(path.join(ROOT, 'docs/send-traces.md'), 'utf8');
    const blocks = nodeSectionBlocks(page);
    expect(blocks.map((b) => b.lang)).toEqual(['sh', 'ts', 'sh', 'sh', 'ts', 'sh']);
    let cwd = tmp;
    const printed: Array<Record<string, string>> = [];
    for (const block of blocks) {
      if (block.lang === 'ts') {
        const name = [...block.prose.matchAll(/as\s+`([\w.-]+\.ts)`/g)].at(-1)?.[1];
        expect(name, `the page names the file to save this block as:\n${block.prose}`).toBeDefined();
        await writeFile(path.join(cwd, name!), block.code);
        continue;
      }
      const ran = await runShell(block.code, cwd);
      cwd = ran.cwd;
      const last = ran.stdout.trim().split('\n').at(-1) ?? '';
      if (last.startsWith('{')) printed.push(JSON.parse(last) as Record<string, string>);
    }
    // The folder is the one the steps made, an ES module package.
    expect(path.dirname(cwd)).toBe(tmp);
    expect(JSON.parse(await readFile(path.join(cwd, 'package.json'), 'utf8'))).toMatchObject({ type: 'module' });

    // Two runs, two traces: OpenTelemetry's SDK (protobuf, gzip), then OpenLLMetry's.
    expect(printed).toHaveLength(2);
    const [otel, openllmetry] = printed as [Record<string, string>, Record<string, string>];
    expect(kassa.exchanges.filter((e) => e.path === '/v1/otlp/v1/traces').every((e) => e.status === 200)).toBe(true);
    expect(kassa.exchanges).toContainEqual(expect.objectContaining({ path: '/v1/otlp/v1/traces', contentType: 'application/x-protobuf', contentEncoding: 'gzip', status: 200 }));

    const first = await ctx.platform.get(`/v1/traces/${otel.trace_id}`).set(bearer(p.key));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.data.spans[0].attributes).toMatchObject({ 'service.name': 'support-bot', 'llm.model': 'gpt-4o', 'llm.tokens.input': 1200, 'llm.tokens.output': 350 });

    expect(openllmetry.answer).toBe('It ships today.');
    const second = await ctx.platform.get(`/v1/traces/${openllmetry.trace_id}`).set(bearer(p.key));
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(second.body.data.name).toBe('support_answer');
    expect(second.body.data.spans.some((s: { attributes: Record<string, unknown> }) => s.attributes['llm.tokens.input'] === 1200)).toBe(true);
  });
});
