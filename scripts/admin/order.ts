/** `order refund`: refunds of merchant orders (full by default, or part of the amount). */
import { Option, type Command } from 'commander';
import { parsePositiveInt, type CliContext } from './cli.js';

export function register(program: Command, ctx: CliContext): void {
  const order = program.command('order').description('Merchant orders');

  order
    .command('refund')
    .description('Refund a PAID order: the whole remainder, or --amount minor units of it')
    .requiredOption('--order <id>', 'order id (ORD_...)')
    .option('--amount <minorUnits>', 'amount to refund in minor units (default: everything refundable)', parsePositiveInt)
    .addOption(new Option('--reason <reason>', 'why (passed to Stripe; sent with order.refunded)').choices(['requested_by_customer', 'duplicate', 'fraudulent']))
    .action(async (opts: { order: string; amount?: number; reason?: 'requested_by_customer' | 'duplicate' | 'fraudulent' }) => {
      const body = { ...(opts.amount !== undefined && { amount: opts.amount }), ...(opts.reason && { reason: opts.reason }) };
      ctx.print(await ctx.call(ctx.client.POST('/v1/orders/{id}/refund', { params: { path: { id: opts.order } }, body })));
    });
}
