/** `meter list|show`: an organization's meters (made with the merchant API or the console). */
import type { Command } from 'commander';
import type { CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const meter = program.command('meter').description('Meters (usage events or telemetry spans turned into quantities)');

  meter
    .command('list')
    .description("List an organization's meters, newest first")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--status <status>', 'ACTIVE (default) or ARCHIVED')
    .action(async (opts: { org: string; status?: string }) => {
      // The allowed statuses are the spec's to check, not the CLI's.
      const query = opts.status !== undefined ? { status: opts.status.toUpperCase() as 'ACTIVE' | 'ARCHIVED' } : {};
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/meters', { params: { path: { id: opts.org }, query } })));
    });

  meter
    .command('show')
    .description('One meter of an organization')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--meter <id>', 'meter id (MTR_...)')
    .action(async (opts: { org: string; meter: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/meters/{meterId}', { params: { path: { id: opts.org, meterId: opts.meter } } })));
    });
}
