/** `price create|list|deactivate`: prices of a catalog product (the merchant API's `pricingId`). */
import { InvalidArgumentError, type Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { parsePositiveInt, usageError, type CliContext } from './cli.js';

type PriceCreate = components['schemas']['PriceCreate'];

/** Minor units: digits only. The range is the API's to check. */
function parseMinorUnits(value: string): number {
  if (!/^[0-9]{1,20}$/.test(value)) throw new InvalidArgumentError('Expected a whole number of minor units (e.g. 1500 for 15.00 USD).');
  return Number(value);
}

const upper = (value: string): string => value.toUpperCase();

interface CreateOptions {
  product: string;
  amount: number;
  currency: string;
  type?: string;
  interval?: string;
  intervalCount?: number;
  name?: string;
  flexible?: boolean;
  min?: number;
  max?: number;
  provider?: string;
}

export function register(program: Command, ctx: CliContext): void {
  const price = program.command('price').description('Prices of catalog products');

  price
    .command('create')
    .description('Create a price for a product (prints it, with its pricingId)')
    .requiredOption('--product <id>', 'product id (PRD_...)')
    .requiredOption('--amount <n>', 'amount in minor units (1500 = 15.00 USD; 1000000 = 1 USDC); the suggested amount with --flexible', parseMinorUnits)
    .requiredOption('--currency <code>', 'USD, EUR, … for card prices; USDC or USDT with --provider CRYPTO', upper)
    .option('--type <type>', 'ONE_TIME (default) or SUBSCRIPTION', upper)
    .option('--interval <interval>', 'DAY, MONTH or YEAR (SUBSCRIPTION only, required there)', upper)
    .option('--interval-count <n>', 'intervals per billing period, 1-365 (SUBSCRIPTION only; default 1)', parsePositiveInt)
    .option('--name <name>', 'price label (pricingName; default: the product name)')
    .option('--flexible', 'the buyer chooses the amount (ONE_TIME only)')
    .option('--min <n>', 'lowest amount the buyer may choose (with --flexible)', parseMinorUnits)
    .option('--max <n>', 'highest amount the buyer may choose (with --flexible)', parseMinorUnits)
    .option('--provider <rail>', 'STRIPE (card, default) or CRYPTO', upper)
    .action(async (opts: CreateOptions) => {
      if ((opts.min !== undefined || opts.max !== undefined) && !opts.flexible) {
        throw usageError('--min and --max only apply with --flexible.');
      }
      const body: PriceCreate = { amount: opts.amount, currency: opts.currency };
      if (opts.type !== undefined) body.pricingType = opts.type as PriceCreate['pricingType'];
      if (opts.interval !== undefined) body.billingInterval = opts.interval as PriceCreate['billingInterval'];
      if (opts.intervalCount !== undefined) body.billingIntervalCount = opts.intervalCount;
      if (opts.name !== undefined) body.pricingName = opts.name;
      if (opts.flexible) body.flexibleAmount = true;
      if (opts.min !== undefined) body.minAmount = opts.min;
      if (opts.max !== undefined) body.maxAmount = opts.max;
      if (opts.provider !== undefined) body.provider = opts.provider as PriceCreate['provider'];
      ctx.print(await ctx.call(ctx.client.POST('/v1/products/{id}/prices', { params: { path: { id: opts.product } }, body })));
    });

  price
    .command('list')
    .description("List a product's prices, inactive ones included, newest first")
    .requiredOption('--product <id>', 'product id (PRD_...)')
    .action(async (opts: { product: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/products/{id}/prices', { params: { path: { id: opts.product } } })));
    });

  price
    .command('deactivate')
    .description('Stop selling a price (final); its payment links are deactivated too')
    .requiredOption('--id <pricingId>', 'price id (PRC_...)')
    .action(async (opts: { id: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/prices/{id}/deactivate', { params: { path: { id: opts.id } } })));
    });
}
