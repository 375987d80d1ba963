/**
 * `org create|update|get|list|set-wallet|wallets|remove-wallet|set-stripe-account|stripe-account|remove-stripe-account`:
 * organizations, the flags that gate checkout creation, crypto receiving wallets, the Stripe connected account.
 */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { parseBool, parsePositiveInt, usageError, type CliContext } from './cli.js';

type OrgUpdate = components['schemas']['OrgUpdate'];

export function register(program: Command, ctx: CliContext): void {
  const org = program.command('org').description('Organizations and their flags');

  org
    .command('create')
    .description('Create an organization (prints it, with its orgId)')
    .requiredOption('--name <name>', 'organization name')
    .option('--display-name <name>', 'the name buyers see on the hosted pages (default: --name)')
    .action(async (opts: { name: string; displayName?: string }) => {
      const body = opts.displayName !== undefined ? { name: opts.name, displayName: opts.displayName } : { name: opts.name };
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs', { body })));
    });

  org
    .command('update')
    .description("Change an organization's name, display name or flags")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--name <name>', 'new name')
    .option('--display-name <name>', 'the name buyers see on the hosted pages')
    .option('--no-display-name', 'show the organization name on the hosted pages again')
    .option('--frozen <bool>', 'true|false: a frozen organization cannot create checkout sessions', parseBool)
    .option('--card-verified <bool>', 'true|false: Card/USD verification complete', parseBool)
    .option('--card-account-enabled <bool>', 'true|false: card payment account present and enabled', parseBool)
    .action(async (opts: { org: string; name?: string; displayName?: string | false; frozen?: boolean; cardVerified?: boolean; cardAccountEnabled?: boolean }) => {
      const body: OrgUpdate = {};
      if (opts.name !== undefined) body.name = opts.name;
      if (opts.displayName !== undefined) body.displayName = opts.displayName === false ? null : opts.displayName;
      if (opts.frozen !== undefined) body.frozen = opts.frozen;
      if (opts.cardVerified !== undefined) body.cardVerified = opts.cardVerified;
      if (opts.cardAccountEnabled !== undefined) body.cardAccountEnabled = opts.cardAccountEnabled;
      // The API would say "must NOT have fewer than 1 properties"; name the flags instead.
      if (Object.keys(body).length === 0) {
        throw usageError('Nothing to update: give at least one of --name, --display-name, --no-display-name, --frozen, --card-verified, --card-account-enabled.');
      }
      ctx.print(await ctx.call(ctx.client.PATCH('/v1/orgs/{id}', { params: { path: { id: opts.org } }, body })));
    });

  org
    .command('get')
    .description('Show one organization')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}', { params: { path: { id: opts.org } } })));
    });

  org
    .command('set-wallet')
    .description("Set the organization's crypto receiving wallet on a chain (validated, stored EIP-55 checksummed)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--chain <chainId>', 'EVM chain id of a configured chain (8453 Base, 84532 Base Sepolia)', parsePositiveInt)
    .requiredOption('--address <address>', 'receiving address 0x… (mixed case must be a valid EIP-55 checksum)')
    .action(async (opts: { org: string; chain: number; address: string }) => {
      ctx.print(
        await ctx.call(
          ctx.client.PUT('/v1/orgs/{id}/receiving-wallets/{chainId}', { params: { path: { id: opts.org, chainId: opts.chain } }, body: { address: opts.address } }),
        ),
      );
    });

  org
    .command('wallets')
    .description("List the organization's crypto receiving wallets")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/receiving-wallets', { params: { path: { id: opts.org } } })));
    });

  org
    .command('remove-wallet')
    .description("Remove the organization's crypto receiving wallet on a chain (issued quotes stay watched)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--chain <chainId>', 'EVM chain id', parsePositiveInt)
    .action(async (opts: { org: string; chain: number }) => {
      ctx.print(await ctx.call(ctx.client.DELETE('/v1/orgs/{id}/receiving-wallets/{chainId}', { params: { path: { id: opts.org, chainId: opts.chain } } })));
    });

  org
    .command('set-stripe-account')
    .description("Bind the organization's card payments to a Stripe connected account (destination charges; checked with Stripe when it is the card processor)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--account <acct>', 'Stripe connected account id (acct_...)')
    .action(async (opts: { org: string; account: string }) => {
      ctx.print(await ctx.call(ctx.client.PUT('/v1/orgs/{id}/stripe-account', { params: { path: { id: opts.org } }, body: { accountId: opts.account } })));
    });

  org
    .command('stripe-account')
    .description("Show the organization's Stripe connected account (accountId null when none)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/stripe-account', { params: { path: { id: opts.org } } })));
    });

  org
    .command('remove-stripe-account')
    .description('Unbind it: new card sessions pay the platform account (open sessions keep theirs)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.DELETE('/v1/orgs/{id}/stripe-account', { params: { path: { id: opts.org } } })));
    });

  org
    .command('list')
    .description('List organizations, newest first (one page)')
    .option('--page <n>', 'page number, from 1 (default 1)', parsePositiveInt)
    .option('--size <n>', 'page size (default 20, at most 100)', parsePositiveInt)
    .action(async (opts: { page?: number; size?: number }) => {
      const query: { page?: number; size?: number } = {};
      if (opts.page !== undefined) query.page = opts.page;
      if (opts.size !== undefined) query.size = opts.size;
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs', { params: { query } })));
    });
}
