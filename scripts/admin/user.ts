/**
 * `user invite|reset-password`: people of an organization (the console document). The operator
 * makes an organization's first owner by invite, and password reset links; both print the link
 * once (it is stored only as a hash).
 */
import type { Command } from 'commander';
import type { components } from '../../generated/admin.js';
import type { CliContext } from './cli.js';

type Role = components['schemas']['OrgInviteCreate']['role'];

export function register(program: Command, ctx: CliContext): void {
  const user = program.command('user').description('People of an organization: invites (first owner) and password resets');

  user
    .command('invite')
    .description('Invite an e-mail address to an organization with a role (prints the single-use link once; valid 7 days)')
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--email <address>', 'the person\'s e-mail address')
    .requiredOption('--role <role>', 'owner, admin, developer, support or viewer')
    .action(async (opts: { org: string; email: string; role: string }) => {
      // An unknown role is the API's to reject (the enum lives in the spec).
      const body = { email: opts.email, role: opts.role as Role };
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/invites', { params: { path: { id: opts.org } }, body })));
    });

  user
    .command('reset-password')
    .description('Make a single-use password reset link for an account (printed once; valid 1 hour)')
    .requiredOption('--email <address>', 'the account\'s e-mail address')
    .action(async (opts: { email: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/users/password-reset', { body: { email: opts.email } })));
    });
}
