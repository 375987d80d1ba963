/** The operator's doors to accounts (admin API): first owners by invite, password reset links. */
import type { AdminHandlers } from '../handler-maps.js';
import { iso } from '../kernel/present.js';
import type { AccountService } from './accounts.service.js';
import { clientAddress } from './console.handlers.js';

export function createAccountsAdminHandlers(accounts: AccountService): Pick<AdminHandlers, 'createOrgInvite' | 'createPasswordResetLink'> {
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
    createPasswordResetLink: async ({ body, req }) => {
      const { link, url, user } = await accounts.createPasswordReset(body.email, clientAddress(req));
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: { success: true, message: 'Password reset link created; it is not shown again', data: { userId: user.id, email: user.email, expiresAt: iso(link.expiresAt), url } },
      };
    },
  };
}
