/** `order list|get|refund`: merchant orders of an organization, and their refunds (full by default, or part of the amount). */
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { operations } from '../../generated/admin.js';
import { parsePositiveInt, type CliContext } from './cli.js';

type OrderListQuery = NonNullable<operations['listOrgOrders']['parameters']['query']>;

/**
 * A date as the API's `date_from` / `date_to` take it (Unix seconds): Unix seconds as given, or an
 * ISO 8601 date or date-time (`2026-11-22`, `2026-11-22T09:30:00Z`; a date alone is midnight UTC).
 */
export function parseUnixTime(value: string): number {
  if (/^[0-9]{1,12}$/.test(value)) return Number(value);
  const ms = /^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.]+(Z|[+-][0-9]{2}:?[0-9]{2})?)?$/.test(value) ? Date.parse(value) : NaN;
  if (Number.isNaN(ms)) throw new InvalidArgumentError('Expected Unix seconds or an ISO 8601 date (2026-11-22 or 2026-11-22T09:30:00Z).');
  return Math.floor(ms / 1000);
}

interface ListOptions {
  org: string;
  status?: string;
  customer?: string;
  subscription?: string;
  reference?: string;
  product?: string;
  provider?: string;
  fromAddress?: string;
  txHash?: string;
  since?: number;
  before?: number;
  page?: number;
  size?: number;
  startingAfter?: string;
  endingBefore?: string;
}

export function register(program: Command, ctx: CliContext): void {
  const order = program.command('order').description('Merchant orders');

  order
    .command('list')
    .description("List an organization's orders, newest first (one page; filters combine with AND, as the merchant API's GET /v1/orders)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--status <status>', 'Pending, Paid, Failed, Refunded or Underpaid (any case)')
    .option('--customer <id>', 'only orders of this customer (CUS_...)')
    .option('--subscription <id>', 'only orders of this subscription (SUB_...): initial order and renewals')
    .option('--reference <text>', 'merchantReference contains this text (case-sensitive)')
    .option('--product <id>', 'only orders of this catalog product (PRD_...)')
    .option('--provider <provider>', 'STRIPE (card) or CRYPTO', (value: string) => value.toUpperCase())
    .option('--from-address <address>', 'buyer wallet of crypto orders (0x..., any case)')
    .option('--tx-hash <hash>', 'transaction hash of crypto orders (0x and 64 hex digits, any case)')
    .option('--since <date>', 'created at or after (Unix seconds or ISO 8601)', parseUnixTime)
    .option('--before <date>', 'created strictly before (Unix seconds or ISO 8601)', parseUnixTime)
    .option('--page <n>', 'page number, from 1 (default 1)', parsePositiveInt)
    .option('--size <n>', 'page size (default 20, at most 100)', parsePositiveInt)
    .option('--starting-after <orderId>', "the page after this order (a page's nextCursor)")
    .option('--ending-before <orderId>', "the page before this order (a page's previousCursor)")
    .action(async (opts: ListOptions) => {
      // The API checks the values (status spelling, provider, address, cursor): its 400 is relayed.
      const query: OrderListQuery = {};
      if (opts.status !== undefined) query.status = opts.status as OrderListQuery['status'];
      if (opts.customer !== undefined) query.customer_id = opts.customer;
      if (opts.subscription !== undefined) query.subscription_id = opts.subscription;
      if (opts.reference !== undefined) query.merchant_reference = opts.reference;
      if (opts.product !== undefined) query.product_id = opts.product;
      if (opts.provider !== undefined) query.provider = opts.provider as OrderListQuery['provider'];
      if (opts.fromAddress !== undefined) query.from_address = opts.fromAddress;
      if (opts.txHash !== undefined) query.tx_hash = opts.txHash;
      if (opts.since !== undefined) query.date_from = opts.since;
      if (opts.before !== undefined) query.date_to = opts.before;
      if (opts.page !== undefined) query.page = opts.page;
      if (opts.size !== undefined) query.size = opts.size;
      if (opts.startingAfter !== undefined) query.starting_after = opts.startingAfter;
      if (opts.endingBefore !== undefined) query.ending_before = opts.endingBefore;
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/orders', { params: { path: { id: opts.org }, query } })));
    });

  order
    .command('get')
    .description('Print one order of an organization (as the merchant API shows it)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--order <id>', 'order id (ORD_...)')
    .action(async (opts: { org: string; order: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/orders/{orderId}', { params: { path: { id: opts.org, orderId: opts.order } } })));
    });

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
