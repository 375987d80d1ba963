/** `apikey create|revoke|list`: merchant API keys (the secret is shown once, at creation). */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import { parseList, type CliContext } from './cli.js';

type ApiKeyCreate = components['schemas']['ApiKeyCreate'];

export function register(program: Command, ctx: CliContext): void {
  const apikey = program.command('apikey').description('Merchant API keys');

  apikey
    .command('create')
    .description('Create a merchant API key (prints it once, with its secret `key`)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .option('--name <name>', 'a label for the key')
    .option('--permissions <list>', 'comma-separated permissions, e.g. checkout:write,orders:read (default: all)', parseList)
    .action(async (opts: { org: string; name?: string; permissions?: string[] }) => {
      const body: ApiKeyCreate = {};
      if (opts.name !== undefined) body.name = opts.name;
      // Unknown permission names are the API's to reject (the enum lives in the spec).
      if (opts.permissions !== undefined) body.permissions = opts.permissions as ApiKeyCreate['permissions'];
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/api-keys', { params: { path: { id: opts.org } }, body })));
    });

  apikey
    .command('revoke')
    .description('Revoke a key at once (requests with it then answer 401)')
    .requiredOption('--id <apiKeyId>', 'API key id (AKI_...)')
    .action(async (opts: { id: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/api-keys/{id}/revoke', { params: { path: { id: opts.id } } })));
    });

  apikey
    .command('list')
    .description("List an organization's keys, revoked ones included (never the secret)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/api-keys', { params: { path: { id: opts.org } } })));
    });
}
