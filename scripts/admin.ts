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
 * Adding a noun: create scripts/admin/<noun>.ts exporting `register(program: Command, ctx: CliContext)`
 * (see org.ts; helpers in scripts/admin/cli.ts), then add one import and one entry to NOUNS below.
 */
import { Command, CommanderError } from 'commander';
import { CliError, EXIT_FAILURE, EXIT_USAGE, connectionFromEnv, createAdminClient, createContext, type CliContext } from './admin/cli.js';
import * as apikey from './admin/apikey.js';
import * as org from './admin/org.js';
import * as product from './admin/product.js';
import * as price from './admin/price.js';
import * as paymentlink from './admin/paymentlink.js';
import * as order from './admin/order.js';
import * as subscription from './admin/subscription.js';
import * as project from './admin/project.js';
import * as telemetryKey from './admin/telemetry-key.js';
import * as wallet from './admin/wallet.js';
import * as agent from './admin/agent.js';
import * as policy from './admin/policy.js';
import * as credit from './admin/credit.js';
import * as signingKey from './admin/signing-key.js';
import * as webhook from './admin/webhook.js';

const NOUNS: ReadonlyArray<{ register(program: Command, ctx: CliContext): void }> = [
  org,
  apikey,
  product,
  price,
  paymentlink,
  project,
  telemetryKey,
  wallet,
  agent,
  policy,
  credit,
  signingKey,
  webhook,
];

function buildProgram(ctx: CliContext): Command {
  const program = new Command('admin')
    .description('Kassa admin CLI: a client of the admin API (prints JSON; --table for a human table)')
    .option('--table', 'print a human-readable table instead of JSON')
    // Commander's own errors become our JSON error document instead of text plus process.exit.
    .exitOverride()
    .configureOutput({ outputError: () => {}, writeErr: () => {} })
    .showSuggestionAfterError(true)
    .hook('preAction', (_program, action) => {
      ctx.format = action.optsWithGlobals<{ table?: boolean }>().table ? 'table' : 'json';
    });
  for (const noun of NOUNS) noun.register(program, ctx);
  program.addHelpText('after', () => `\nAll commands:\n${commandSummary(program)}\nEnvironment: ADMIN_URL (or ADMIN_HOST, ADMIN_PORT), ADMIN_TOKEN (or DATA_DIR/admin-token).\n`);
  return program;
}

/** Every `noun verb` with its flags, so `--help` shows the whole surface at once. */
function commandSummary(program: Command): string {
  const lines: string[] = [];
  for (const noun of program.commands) {
    for (const verb of noun.commands) {
      const flags = verb.options.map((o) => (o.mandatory ? o.flags : `[${o.flags}]`));
      lines.push(`  ${[noun.name(), verb.name(), ...flags].join(' ')}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

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
