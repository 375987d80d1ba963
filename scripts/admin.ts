/**
 * Kassa admin CLI: `npm run -s admin -- <noun> <verb> [--flags]` (add `--table` for humans).
 * A typed client of the admin API (openapi/admin.yaml → generated/admin.ts via openapi-fetch), so it
 * works while the server holds the embedded database. Connection: ADMIN_URL, else
 * http://ADMIN_HOST:ADMIN_PORT (127.0.0.1:3002); token: ADMIN_TOKEN, else <DATA_DIR>/admin-token.
 *
 * Output contract (scripts rely on it): success → exactly one JSON document on stdout (the
 * envelope's `data`) and exit 0; failure → one `{"error":{"code","message","status"}}` document on
 * stderr, exit 1 for a failed request, exit 2 for a wrong command line.
 *
 * The commands themselves are registered in scripts/admin/program.ts (how to add one: see there);
 * one invocation is scripts/admin/run.ts.
 */
import { connectionFromEnv, createAdminClient } from './admin/cli.js';
import { runAdmin } from './admin/run.js';

process.exitCode = await runAdmin(process.argv.slice(2), {
  client: createAdminClient(connectionFromEnv()),
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
});
