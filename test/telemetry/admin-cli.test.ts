/**
 * `project` and `telemetry-key` of the admin CLI, run through the CLI's own entry in-process
 * (test/harness/admin-cli.ts) against the admin app on an ephemeral port (the child-process
 * contract is test/admin-cli.test.ts's). The key it prints authenticates the telemetry API; revoking stops it.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../harness/context.js';
import { bearer } from './helpers.js';
import { runAdminCli } from '../harness/admin-cli.js';

let ctx: TestContext;
let server: Server;
let adminUrl: string;

const run = (args: string[]) => runAdminCli(adminUrl, ctx.adminToken, args);

async function json(args: string[]): Promise<any> {
  const result = await run(args);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return JSON.parse(result.stdout);
}

beforeAll(async () => {
  ctx = await createTestContext();
  server = await new Promise<Server>((resolve) => {
    const s = ctx.apps.admin.listen(0, '127.0.0.1', () => resolve(s));
  });
  adminUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await ctx?.close();
});

describe('admin CLI: project and telemetry-key', () => {
  it('creates a project, a key that works, lists and revokes it', async () => {
    const project = await json(['project', 'create', '--org', ctx.orgA.orgId, '--name', 'CLI Bot', '--environment', 'staging', '--description', 'from the CLI']);
    expect(project).toMatchObject({ orgId: ctx.orgA.orgId, name: 'CLI Bot', slug: 'cli-bot', environment: 'staging', description: 'from the CLI' });

    const created = await json(['telemetry-key', 'create', '--org', ctx.orgA.orgId, '--project', project.projectId, '--name', 'cli']);
    expect(created.key).toMatch(/^tk_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ projectId: project.projectId, name: 'cli', revoked: false });
    const projects = await ctx.platform.get('/v1/projects').set(bearer(created.key));
    expect(projects.status).toBe(200);
    expect(projects.body.data.map((p: { id: string }) => p.id)).toContain(project.projectId);

    const listed = await json(['telemetry-key', 'list', '--org', ctx.orgA.orgId]);
    expect(listed.map((k: { telemetryKeyId: string }) => k.telemetryKeyId)).toContain(created.telemetryKeyId);
    expect(JSON.stringify(listed)).not.toContain(created.key);
    expect((await json(['project', 'list', '--org', ctx.orgA.orgId])).map((p: { projectId: string }) => p.projectId)).toContain(project.projectId);

    const revoked = await json(['telemetry-key', 'revoke', '--id', created.telemetryKeyId]);
    expect(revoked).toMatchObject({ telemetryKeyId: created.telemetryKeyId, revoked: true });
    expect((await ctx.platform.get('/v1/projects').set(bearer(created.key))).status).toBe(401);
  });

  it('reports API errors as one JSON document on stderr with exit 1', async () => {
    const result = await run(['telemetry-key', 'create', '--org', ctx.orgA.orgId, '--project', 'PRJ_unknown']);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(JSON.parse(result.stderr)).toEqual({ error: { code: 'NOT_FOUND', message: 'Project not found', status: 404 } });
    const bad = await run(['project', 'create', '--org', ctx.orgA.orgId, '--name', 'x', '--environment', 'qa']);
    expect(bad.code).toBe(1);
    expect(JSON.parse(bad.stderr).error).toMatchObject({ code: 'VALIDATION_ERROR', status: 400 });
  });

  it('reports a missing required flag as a usage error (exit 2)', async () => {
    const result = await run(['telemetry-key', 'create', '--org', ctx.orgA.orgId]);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr).error.code).toBe('USAGE_ERROR');
  });
});
