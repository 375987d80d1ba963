/**
 * The admin CLI's command tree: every noun registered on one commander program. Kept apart from
 * scripts/admin.ts (which runs it) so tests can enumerate the registered commands.
 *
 * Adding a noun: create scripts/admin/<noun>.ts exporting `register(program: Command, ctx: CliContext)`
 * (see org.ts; helpers in cli.ts), add one import and one entry to NOUNS below, document it in
 * docs/cli.md and run it in test/admin-cli-commands.test.ts (that test fails until both are done).
 */
import { Command } from 'commander';
import type { CliContext } from './cli.js';
import * as apikey from './apikey.js';
import * as org from './org.js';
import * as product from './product.js';
import * as price from './price.js';
import * as paymentlink from './paymentlink.js';
import * as order from './order.js';
import * as subscription from './subscription.js';
import * as project from './project.js';
import * as telemetryKey from './telemetry-key.js';
import * as wallet from './wallet.js';
import * as agent from './agent.js';
import * as policy from './policy.js';
import * as credit from './credit.js';
import * as signingKey from './signing-key.js';
import * as webhook from './webhook.js';
import * as x402 from './x402.js';
import * as user from './user.js';
import * as meter from './meter.js';
import * as usage from './usage.js';

export const NOUNS: ReadonlyArray<{ register(program: Command, ctx: CliContext): void }> = [
  org,
  apikey,
  product,
  price,
  paymentlink,
  order,
  subscription,
  project,
  telemetryKey,
  wallet,
  agent,
  policy,
  credit,
  signingKey,
  webhook,
  x402,
  user,
  meter,
  usage,
];

export function buildProgram(ctx: CliContext): Command {
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
