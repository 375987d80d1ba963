/** `product create|update|archive|list`: catalog products of an organization. */
import { InvalidArgumentError, type Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { parsePositiveInt, usageError, type CliContext } from './cli.js';

type ProductCreate = components['schemas']['ProductCreate'];
type ProductUpdate = components['schemas']['ProductUpdate'];
type ProductStatus = components['schemas']['ProductStatus'];

/** Uppercased for convenience; whether the value is a state is the API's to say. */
const parseStatus = (value: string): string => {
  if (!/^[A-Za-z_]+$/.test(value)) throw new InvalidArgumentError('Expected PUBLISHED, DRAFT or ARCHIVED.');
  return value.toUpperCase();
};

export function register(program: Command, ctx: CliContext): void {
  const product = program.command('product').description('Catalog products (merchants read them with GET /v1/product)');

  product
    .command('create')
    .description('Create a product (prints it, with its productId)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--name <name>', 'product name')
    .option('--description <text>', 'product description')
    .option('--status <status>', 'PUBLISHED (default) or DRAFT', parseStatus)
    .action(async (opts: { org: string; name: string; description?: string; status?: string }) => {
      const body: ProductCreate = { name: opts.name };
      if (opts.description !== undefined) body.description = opts.description;
      if (opts.status !== undefined) body.status = opts.status as ProductCreate['status'];
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/products', { params: { path: { id: opts.org } }, body })));
    });

  product
    .command('update')
    .description("Change a product's name, description or state")
    .requiredOption('--product <id>', 'product id (PRD_...)')
    .option('--name <name>', 'new name')
    .option('--description <text>', 'new description')
    .option('--no-description', 'remove the description')
    .option('--status <status>', 'PUBLISHED, DRAFT or ARCHIVED', parseStatus)
    .action(async (opts: { product: string; name?: string; description?: string | boolean; status?: string }) => {
      const body: ProductUpdate = {};
      if (opts.name !== undefined) body.name = opts.name;
      // commander: --description <text> gives a string, --no-description gives false.
      if (typeof opts.description === 'string') body.description = opts.description;
      else if (opts.description === false) body.description = null;
      if (opts.status !== undefined) body.status = opts.status as ProductStatus;
      if (Object.keys(body).length === 0) {
        throw usageError('Nothing to update: give at least one of --name, --description, --no-description, --status.');
      }
      ctx.print(await ctx.call(ctx.client.PATCH('/v1/products/{id}', { params: { path: { id: opts.product } }, body })));
    });

  product
    .command('archive')
    .description('Archive a product (out of the default merchant list; checkout refuses it)')
    .requiredOption('--product <id>', 'product id (PRD_...)')
    .action(async (opts: { product: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/products/{id}/archive', { params: { path: { id: opts.product } } })));
    });

  product
    .command('list')
    .description("List an organization's products, newest first (one page; every state unless --status)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--status <status>', 'only PUBLISHED, DRAFT or ARCHIVED products', parseStatus)
    .option('--search <text>', 'case-insensitive substring of the name')
    .option('--page <n>', 'page number, from 1 (default 1)', parsePositiveInt)
    .option('--size <n>', 'page size (default 20, at most 100)', parsePositiveInt)
    .action(async (opts: { org: string; status?: string; search?: string; page?: number; size?: number }) => {
      const query: { status?: ProductStatus; search?: string; page?: number; size?: number } = {};
      if (opts.status !== undefined) query.status = opts.status as ProductStatus;
      if (opts.search !== undefined) query.search = opts.search;
      if (opts.page !== undefined) query.page = opts.page;
      if (opts.size !== undefined) query.size = opts.size;
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/products', { params: { path: { id: opts.org }, query } })));
    });
}
