/** `subscription cancel|pause|resume`: card subscriptions. */
import type { Command } from 'commander';
import type { CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const subscription = program.command('subscription').description('Card subscriptions');

  subscription
    .command('cancel')
    .description('Cancel at the end of the paid period (default), or at once with --now')
    .requiredOption('--id <subscriptionId>', 'subscription id (SUB_...)')
    .option('--now', 'cancel immediately (status CANCELED) instead of at period end')
    .action(async (opts: { id: string; now?: boolean }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/subscriptions/{id}/cancel', { params: { path: { id: opts.id } }, body: { atPeriodEnd: !opts.now } })));
    });

  for (const verb of ['pause', 'resume'] as const) {
    subscription
      .command(verb)
      .description(verb === 'pause' ? 'Pause renewals' : 'Resume a paused subscription')
      .requiredOption('--id <subscriptionId>', 'subscription id (SUB_...)')
      .action(async (opts: { id: string }) => {
        ctx.print(await ctx.call(ctx.client.POST(`/v1/subscriptions/{id}/${verb}`, { params: { path: { id: opts.id } } })));
      });
  }
}
