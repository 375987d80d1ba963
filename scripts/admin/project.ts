/** `project create|list`: telemetry projects of an organization. */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import type { CliContext } from './cli.js';

type ProjectCreate = components['schemas']['TelemetryProjectCreate'];

export function register(program: Command, ctx: CliContext): void {
  const project = program.command('project').description('Telemetry projects');

  project
    .command('create')
    .description("Create a telemetry project (an organization's first one is created here)")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--name <name>', 'display name (the slug is derived from it)')
    .option('--environment <env>', 'development | staging | production (default production)')
    .option('--description <text>', 'free text')
    .action(async (opts: { org: string; name: string; environment?: string; description?: string }) => {
      const body: ProjectCreate = { name: opts.name };
      // The allowed environments are the spec's to check, not the CLI's.
      if (opts.environment !== undefined) body.environment = opts.environment as ProjectCreate['environment'];
      if (opts.description !== undefined) body.description = opts.description;
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/telemetry-projects', { params: { path: { id: opts.org } }, body })));
    });

  project
    .command('list')
    .description("List an organization's telemetry projects, oldest first")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .action(async (opts: { org: string }) => {
      ctx.print(await ctx.call(ctx.client.GET('/v1/orgs/{id}/telemetry-projects', { params: { path: { id: opts.org } } })));
    });
}
