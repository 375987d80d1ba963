/** `usage show`: a customer's usage this period and the estimated next charge, per metered subscription. */
import type { Command } from 'commander';
import type { CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const usage = program.command('usage').description("Customers' usage of metered prices");

  usage
    .command('show')
    .description("A customer's usage this period per meter and the estimated next charge (--meter: that meter's lines only)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--customer <id>', 'customer id (CUS_...) or the customer\'s externalId')
    .option('--meter <id>', 'only this meter (MTR_...)')
    .action(async (opts: { org: string; customer: string; meter?: string }) => {
      const data = await ctx.call(ctx.client.GET('/v1/orgs/{id}/customers/{customerId}/usage', { params: { path: { id: opts.org, customerId: opts.customer } } }));
      if (opts.meter === undefined) return ctx.print(data);
      // One meter: its USAGE line of each subscription that bills it (the estimated total stays the whole charge's).
      ctx.print(
        data.subscriptions.flatMap((s) =>
          s.lines
            .filter((l) => l.usage?.meterId === opts.meter)
            .map((l) => ({
              subscriptionId: s.subscriptionId,
              periodStart: s.periodStart,
              periodEnd: s.periodEnd,
              meterId: l.usage!.meterId,
              meter: l.description,
              quantity: l.quantity,
              includedUnits: l.usage!.includedUnits,
              billableQuantity: l.usage!.billableQuantity,
              estimatedAmountCents: l.amountCents,
              currency: s.currency,
            })),
        ),
      );
    });
}
