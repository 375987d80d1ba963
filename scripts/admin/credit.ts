/** `credit grant|balance`: the organization's credit pool (an append-only ledger in minor units). */
import type { Command } from 'commander';
import { USDC_DECIMALS } from '../../src/agent-wallet/chains.js';
import { usageError, type CliContext } from './cli.js';

/** Decimals of each credit unit; the API takes minor units, people type whole units. */
const DECIMALS: Record<string, number> = { USDC: USDC_DECIMALS };

/** `2.5` with 6 decimals → 2500000, exactly (no floating point). */
export function toMinorUnits(value: string, decimals: number): number {
  const match = /^(0|[1-9][0-9]{0,8})(?:\.([0-9]+))?$/.exec(value);
  if (!match || (match[2] ?? '').length > decimals) {
    throw usageError(`--amount: expected a positive amount with at most ${decimals} decimals, e.g. 5 or 2.5, got "${value}".`);
  }
  const minor = Number(`${match[1]}${(match[2] ?? '').padEnd(decimals, '0')}`);
  if (minor <= 0) throw usageError('--amount: expected an amount above 0.');
  return minor;
}

export function register(program: Command, ctx: CliContext): void {
  const credit = program.command('credit').description("The organization's credit pool");

  credit
    .command('grant')
    .description('Add credit (a ledger entry) and print the entry with the new balance')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--amount <n>', 'amount in whole units of --unit, e.g. 5 or 2.5 (USDC: up to 6 decimals)')
    .option('--unit <unit>', 'credit unit', 'USDC')
    .option('--reason <text>', 'why the credit is granted')
    .action(async (opts: { org: string; amount: string; unit: string; reason?: string }) => {
      const decimals = DECIMALS[opts.unit];
      if (decimals === undefined) throw usageError(`--unit: unknown unit ${opts.unit}; one of ${Object.keys(DECIMALS).join(', ')}.`);
      const body = {
        amount: toMinorUnits(opts.amount, decimals),
        unit: opts.unit as 'USDC',
        ...(opts.reason === undefined ? {} : { reason: opts.reason }),
      };
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/credit', { params: { path: { id: opts.org } }, body })));
    });

  credit
    .command('balance')
    .description("Show the organization's credit balance")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/credit', { params: { path: { id: opts.org } } })));
    });
}
