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
 * The commands themselves are registered in scripts/admin/program.ts (how to add one: see there).
 */
import { type Command, CommanderError } from 'commander';
import { CliError, EXIT_FAILURE, EXIT_USAGE, connectionFromEnv, createAdminClient, createContext } from './admin/cli.js';
import { buildProgram } from './admin/program.js';

/** `admin org` without a verb: name the verbs instead of printing help on stderr. */
function missingCommand(program: Command, args: string[]): CliError {
  let command = program;
  const words = ['admin'];
  for (const arg of args) {
    if (arg.startsWith('-')) continue;
    const sub = command.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!sub) break;
    command = sub;
    words.push(arg);
  }
  const verbs = command.commands.map((c) => c.name()).filter((name) => name !== 'help');
  return new CliError('USAGE_ERROR', `Missing command: ${words.join(' ')} expects one of ${verbs.join(', ')} (see --help).`, null, EXIT_USAGE);
}

function toCliError(err: unknown, program: Command, args: string[]): CliError | undefined {
  if (err instanceof CliError) return err;
  if (err instanceof CommanderError) {
    if (err.exitCode === 0) return undefined; // --help, help <cmd>
    if (err.code === 'commander.help') return missingCommand(program, args);
    return new CliError('USAGE_ERROR', err.message.replace(/^error: /, ''), null, EXIT_USAGE);
  }
  return new CliError('CLI_ERROR', err instanceof Error ? err.message : String(err), null, EXIT_FAILURE);
}

async function main(): Promise<void> {
  const ctx = createContext(createAdminClient(connectionFromEnv()));
  const program = buildProgram(ctx);
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    const failure = toCliError(err, program, process.argv.slice(2));
    if (!failure) return;
    process.stderr.write(`${JSON.stringify(failure.toJSON())}\n`);
    process.exitCode = failure.exitCode;
  }
}

await main();
