/**
 * `user invite|invite-link|reset-password`: people of an organization (the console document). The
 * operator makes an organization's first owner by invite, prints a new link for a member's pending
 * invite (without outgoing e-mail nobody else sees one), and password reset links, listing what
 * else signs in to the account; each prints the link once (it is stored only as a hash).
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
    .command('invite-link')
    .description("Print a new link for a pending invite (the previous link stops working): give it to the invited address only")
    .requiredOption('--org <id>', 'organization id (ORG_...)')
    .requiredOption('--invite <id>', 'the invite (LNK_..., listed in the console under Settings → Members)')
    .action(async (opts: { org: string; invite: string }) => {
      ctx.print(await ctx.call(ctx.client.POST('/v1/orgs/{id}/invites/{inviteId}/link', { params: { path: { id: opts.org, inviteId: opts.invite } } })));
    });

  user
    .command('reset-password')
    .description('Make a single-use password reset link for an account (printed once; valid 1 hour); lists its passkeys and sessions')
    .requiredOption('--email <address>', 'the account\'s e-mail address')
    .option('--remove-passkeys', 'remove every passkey of the account (before handing it back to the owner of the address)')
    .option('--revoke-sessions', 'sign the account out of every session now')
    .action(async (opts: { email: string; removePasskeys?: boolean; revokeSessions?: boolean }) => {
      const body = { email: opts.email, ...(opts.removePasskeys ? { removePasskeys: true } : {}), ...(opts.revokeSessions ? { revokeSessions: true } : {}) };
      ctx.print(await ctx.call(ctx.client.POST('/v1/users/password-reset', { body })));
    });
}
