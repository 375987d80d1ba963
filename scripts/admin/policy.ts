/** `policy create|list|delete`: wallet policies (Privy's shape), enforced on every signing request. */
import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { usageError, type CliContext } from './cli.js';

type WalletPolicyCreate = components['schemas']['WalletPolicyCreate'];

/** The file's JSON as is: its shape and meaning are the API's to check, with precise messages. */
function readPolicyFile(file: string): WalletPolicyCreate {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw usageError(`Cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as WalletPolicyCreate;
  } catch (err) {
    throw usageError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
}

export function register(program: Command, ctx: CliContext): void {
  const policy = program.command('policy').description('Wallet policies: which typed data the wallet may sign');

  policy
    .command('create')
    .description('Attach a policy read from a JSON file: {"version":"1.0","name":…,"chain_type":"ethereum","rules":[…]}')
    .requiredOption('--wallet <id>', 'wallet id (WLT_...)')
    .requiredOption('--file <path>', 'policy JSON file')
    .action(async (opts: { wallet: string; file: string }) => {
      const body = readPolicyFile(opts.file);
      ctx.print(await ctx.call(ctx.client.POST('/v1/wallets/{id}/policies', { params: { path: { id: opts.wallet } }, body })));
    });

  policy
    .command('list')
    .description("List a wallet's policies in evaluation order")
    .requiredOption('--wallet <id>', 'wallet id (WLT_...)')
    .action(async (opts: { wallet: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/wallets/{id}/policies', { params: { path: { id: opts.wallet } } })));
    });

  policy
    .command('delete')
    .description('Delete a policy (a wallet without policies denies every signing request)')
    .requiredOption('--policy <id>', 'policy id (POL_...)')
    .action(async (opts: { policy: string }) => {
      ctx.print(await ctx.call(ctx.client.DELETE('/v1/policies/{id}', { params: { path: { id: opts.policy } } })));
    });
}
