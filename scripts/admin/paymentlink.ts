/** `paymentlink create|deactivate`: reusable buyer URLs for a price. */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import type { CliContext } from './cli.js';

type PaymentLinkCreate = components['schemas']['PaymentLinkCreate'];

export function register(program: Command, ctx: CliContext): void {
  const link = program.command('paymentlink').description('Payment links: reusable buyer URLs for a price');

  link
    .command('create')
    .description('Create a payment link for a price (prints paymentLinkId and paymentLinkUrl)')
    .requiredOption('--price <id>', 'price id (PRC_...)')
    .option('--name <name>', "link name (default: the price's pricingName)")
    .action(async (opts: { price: string; name?: string }) => {
      const body: PaymentLinkCreate = {};
      if (opts.name !== undefined) body.name = opts.name;
      ctx.print(await ctx.call(ctx.client.POST('/v1/prices/{id}/payment-links', { params: { path: { id: opts.price } }, body })));
    });

  link
    .command('deactivate')
    .description('Deactivate a payment link (its URL stops opening checkouts)')
    .requiredOption('--id <paymentLinkId>', 'payment link id (PLK_...)')
    .action(async (opts: { id: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/payment-links/{id}/deactivate', { params: { path: { id: opts.id } } })));
    });
}
