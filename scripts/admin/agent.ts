/** `agent create|list|assign|revoke|rotate-key`: agents and their P-256 keys (Agent Wallet Keys). */
import type { Command } from 'commander';
import { usageError, type CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const agent = program.command('agent').description('Agents of the agent wallet runtime and their P-256 keys');

  agent
    .command('create')
    .description('Register an agent; without --pubkey, generate its key and print the Agent Wallet Key once (agentWalletKey)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--name <name>', 'display name')
    .option('--pubkey <base64>', 'standard base64 DER SPKI of an existing P-256 public key')
    .option('--wallet <id>', 'assign this wallet (WLT_...) at once')
    .action(async (opts: { org: string; name: string; pubkey?: string; wallet?: string }) => {
      const body: { name: string; publicKey?: string; walletId?: string } = { name: opts.name };
      if (opts.pubkey !== undefined) body.publicKey = opts.pubkey;
      if (opts.wallet !== undefined) body.walletId = opts.wallet;
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/agents', { params: { path: { id: opts.org } }, body })));
    });

  agent
    .command('list')
    .description("List an organization's agents, revoked ones included")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/agents', { params: { path: { id: opts.org } } })));
    });

  agent
    .command('assign')
    .description("Assign a wallet of the agent's organization to the agent (or --unassign)")
    .requiredOption('--agent <id>', 'agent id (AGT_...)')
    .option('--wallet <id>', 'wallet id (WLT_...)')
    .option('--unassign', 'remove the assigned wallet')
    .action(async (opts: { agent: string; wallet?: string; unassign?: boolean }) => {
      if ((opts.wallet === undefined) === !opts.unassign) throw usageError('Give exactly one of --wallet <id> and --unassign.');
      const body = { walletId: opts.wallet ?? null };
      ctx.print(await ctx.call(ctx.client.POST('/v1/agents/{id}/assign', { params: { path: { id: opts.agent } }, body })));
    });

  agent
    .command('revoke')
    .description('Revoke an agent at once (its requests then answer 401); permanent')
    .requiredOption('--agent <id>', 'agent id (AGT_...)')
    .action(async (opts: { agent: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/agents/{id}/revoke', { params: { path: { id: opts.agent } } })));
    });

  agent
    .command('rotate-key')
    .description("Replace the agent's key; without --pubkey, generate one and print the new Agent Wallet Key once")
    .requiredOption('--agent <id>', 'agent id (AGT_...)')
    .option('--pubkey <base64>', 'standard base64 DER SPKI of the new P-256 public key')
    .action(async (opts: { agent: string; pubkey?: string }) => {
      const body = opts.pubkey === undefined ? {} : { publicKey: opts.pubkey };
      ctx.print(await ctx.call(ctx.client.POST('/v1/agents/{id}/rotate-key', { params: { path: { id: opts.agent } }, body })));
    });
}
