/**
 * The admin CLI run in-process through its own entry (scripts/admin/run.ts, what scripts/admin.ts
 * runs with the process's argv and streams), against an admin app over HTTP. For tests of what the
 * commands do; the child-process contract (stdout, stderr, exit codes, the token file) is
 * test/admin-cli.test.ts's.
 */
import { connectionFromEnv, createAdminClient } from '../../scripts/admin/cli.js';
import { runAdmin } from '../../scripts/admin/run.js';

export interface AdminCliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function runAdminCli(adminUrl: string, adminToken: string, args: string[]): Promise<AdminCliResult> {
  let stdout = '';
  let stderr = '';
  const code = await runAdmin(args, {
    client: createAdminClient(connectionFromEnv({ ADMIN_URL: adminUrl, ADMIN_TOKEN: adminToken })),
    out: (text) => void (stdout += text),
    err: (text) => void (stderr += text),
  });
  return { code, stdout, stderr };
}
