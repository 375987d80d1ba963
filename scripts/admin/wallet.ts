/** `wallet create|list`: an organization's agent wallets (secp256k1 keys generated and sealed server-side). */
import type { Command } from 'commander';
import type { CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const wallet = program.command('wallet').description('Agent wallets (EVM, at most 5 per organization)');

  wallet
    .command('create')
    .description('Create a wallet with the default policy (USDC transfers up to 5 USDC on Base and Base Sepolia)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--name <name>', 'display name (default "Wallet")')
    .action(async (opts: { org: string; name?: string }) => {
      const body = opts.name === undefined ? {} : { name: opts.name };
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/wallets', { params: { path: { id: opts.org } }, body })));
    });

  wallet
    .command('list')
    .description("List an organization's wallets (addresses only, never keys)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/wallets', { params: { path: { id: opts.org } } })));
    });
}
