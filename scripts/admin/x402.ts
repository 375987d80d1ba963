/** `x402 relayer-create|relayer`: the account that submits x402 settlements (docs/x402-merchants.md). */
import type { Command } from 'commander';
import type { CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const x402 = program.command('x402').description('Kassa as an x402 facilitator');

  x402
    .command('relayer-create')
    .description('Create the relayer account (its key is generated and stored sealed; prints the address to fund with gas)')
    .action(async () => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/x402/relayer')));
    });

  x402
    .command('relayer')
    .description('Show the relayer address')
    .action(async () => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/x402/relayer')));
    });
}
