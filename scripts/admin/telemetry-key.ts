/** `telemetry-key create|revoke|list`: telemetry API keys (the secret is shown once, at creation). */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import type { CliContext } from './cli.js';

type KeyCreate = components['schemas']['TelemetryKeyCreate'];

export function register(program: Command, ctx: CliContext): void {
  const key = program.command('telemetry-key').description('Telemetry API keys (Authorization: Bearer tk_...)');

  key
    .command('create')
    .description("Create a key for one of the organization's projects (prints it once, with its secret `key`)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--project <id>', 'project id (PRJ_...)')
    .option('--name <name>', 'a label for the key')
    .action(async (opts: { org: string; project: string; name?: string }) => {
      const body: KeyCreate = { projectId: opts.project };
      if (opts.name !== undefined) body.name = opts.name;
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/telemetry-keys', { params: { path: { id: opts.org } }, body })));
    });

  key
    .command('revoke')
    .description('Revoke a key at once (telemetry requests with it then answer 401)')
    .requiredOption('--id <telemetryKeyId>', 'telemetry key id (TKI_...)')
    .action(async (opts: { id: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/telemetry-keys/{id}/revoke', { params: { path: { id: opts.id } } })));
    });

  key
    .command('list')
    .description("List an organization's telemetry keys, revoked ones included (never the secret)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/telemetry-keys', { params: { path: { id: opts.org } } })));
    });
}
