/** The operator's doors to accounts (admin API): first owners by invite, invite links, password reset links. */
import type { AdminHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { AccountService } from './accounts.service.js';
import { clientAddress } from './console.handlers.js';

export function createAccountsAdminHandlers(accounts: AccountService): Pick<AdminHandlers, 'createOrgInvite' | 'reissueOrgInviteLink' | 'createPasswordResetLink'> {
  return {
    createOrgInvite: async ({ params, body, req }) => {
      const { link, url } = await accounts.invite({ orgId: params.id, email: body.email, role: body.role, by: { type: 'operator' }, clientAddress: clientAddress(req) });
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: {
          success: true,
          message: 'Invite created; send the link, it is not shown again',
          data: { inviteId: link.id, orgId: link.orgId!, email: link.email, role: link.role!, expiresAt: iso(link.expiresAt), url },
        },
      };
    },
    reissueOrgInviteLink: async ({ params, req }) => {
      const { link, url } = await accounts.reissueInviteLink(params.id, params.inviteId, clientAddress(req));
      return {
        status: 200,
        headers: { 'Cache-Control': 'no-store' },
        body: {
          success: true,
          message: 'A new link for the invite; the previous one no longer works. Send it to the invited address only',
          data: { inviteId: link.id, orgId: link.orgId!, email: link.email, role: link.role!, expiresAt: iso(link.expiresAt), url },
        },
      };
    },
    createPasswordResetLink: async ({ body, req }) => {
      const reset = await accounts.createPasswordReset(body.email, clientAddress(req), { removePasskeys: body.removePasskeys, revokeSessions: body.revokeSessions });
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: {
          success: true,
          message: 'Password reset link created; it is not shown again',
          data: {
            userId: reset.user.id,
            email: reset.user.email,
            expiresAt: iso(reset.link.expiresAt),
            url: reset.url,
            passkeys: reset.passkeys.map((p) => ({ passkeyId: p.id, name: p.name, createdAt: iso(p.createdAt), lastUsedAt: isoOrNull(p.lastUsedAt) })),
            sessions: reset.sessions.map((s) => ({ sessionId: s.id, orgId: s.orgId, strength: s.strength, createdAt: iso(s.createdAt), lastSeenAt: iso(s.lastSeenAt), clientAddress: s.clientAddress })),
            removedPasskeys: reset.removedPasskeys,
            revokedSessions: reset.revokedSessions,
          },
        },
      };
    },
  };
}
