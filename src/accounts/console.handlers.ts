/** The console document's operations (openapi/console.yaml): thin, the rules are in the services. */
import type { Request } from 'express';
import type { ConsoleHandlers } from '../handler-maps.js';
import type { Clock } from '../kernel/clock.js';
import { iso, isoOrNull, page } from '../kernel/present.js';
import { forbidden } from '../kernel/errors.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { ApiKey } from '../orgs/orgs.repository.js';
import type { Permission } from '../orgs/permissions.js';
import type { AccountService, SessionAuth, SignedIn } from './accounts.service.js';
import type { AccountLink, AuditEntry, Member } from './accounts.repository.js';
import type { AuditLog } from './audit.service.js';
import { keyPermissionsOf, type Role } from './roles.js';
import { ROLE_PERMISSIONS } from './roles.js';
import { checkOrigin, clearedSessionCookie, sessionCookie, type ConsoleOrigin } from './request-auth.js';

export const clientAddress = (req: Request): string | null => req.ip ?? null;

const presentKey = (key: ApiKey) => ({
  apiKeyId: key.id,
  orgId: key.orgId,
  name: key.name,
  prefix: key.prefix,
  permissions: key.permissions as Permission[],
  revoked: key.revokedAt !== null,
  createdAt: iso(key.createdAt),
  revokedAt: isoOrNull(key.revokedAt),
  createdBy: key.createdBy ?? null,
  lastUsedAt: isoOrNull(key.lastUsedAt ?? null),
});

const presentMember = (m: Member) => ({ userId: m.userId, email: m.email, name: m.name, role: m.role, joinedAt: iso(m.createdAt) });

const inviteStatus = (link: AccountLink, now: Date) =>
  link.usedAt ? ('ACCEPTED' as const) : link.revokedAt ? ('REVOKED' as const) : link.expiresAt <= now ? ('EXPIRED' as const) : ('PENDING' as const);

const presentInvite = (link: AccountLink, now: Date) => ({
  inviteId: link.id,
  email: link.email,
  role: link.role!,
  status: inviteStatus(link, now),
  createdAt: iso(link.createdAt),
  expiresAt: iso(link.expiresAt),
});

const presentAudit = (e: AuditEntry) => ({
  auditId: e.id,
  actorType: e.actorType,
  actorId: e.actorId,
  action: e.action,
  targetType: e.targetType,
  targetId: e.targetId,
  summary: e.summary,
  clientAddress: e.clientAddress,
  createdAt: iso(e.createdAt),
});

/** The console operations of this module: sessions, members, invites, API keys, the audit log (other domains serve the rest). */
export type AccountConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'signIn' | 'acceptInvite' | 'completePasswordReset' | 'redeemSignInLink' | 'getConsoleSession' | 'switchOrganization'
  | 'signOut' | 'signOutEverywhere' | 'listConsoleApiKeys' | 'createConsoleApiKey' | 'revokeConsoleApiKey'
  | 'listMembers' | 'updateMemberRole' | 'removeMember' | 'listInvites' | 'createInvite' | 'revokeInvite' | 'listAuditLog'
>;

export function createConsoleHandlers(deps: { accounts: AccountService; orgs: OrgService; audit: AuditLog; clock: Clock; where: ConsoleOrigin }): AccountConsoleHandlers {
  const { accounts, orgs, audit, clock, where } = deps;

  const describe = async (auth: { userId: string; sessionId: string; role: Role; orgId: string; csrfToken: string }, expiresAt: Date) => {
    const { user, memberships } = await accounts.describeSession(auth as SessionAuth);
    const named = await Promise.all(memberships.map(async (m) => ({ orgId: m.orgId, name: OrgServiceName(await orgs.getOrganization(m.orgId)), role: m.role })));
    const current = named.find((m) => m.orgId === auth.orgId);
    return {
      sessionId: auth.sessionId,
      user: { userId: user.id, email: user.email, name: user.name },
      organization: { orgId: auth.orgId, name: current?.name ?? '' },
      role: auth.role,
      permissions: [...ROLE_PERMISSIONS[auth.role]],
      memberships: named,
      csrfToken: auth.csrfToken,
      expiresAt: iso(expiresAt),
    };
  };

  /** The answer that starts a session: its cookie, and what the console shows. */
  const started = async (signedIn: SignedIn, message: string) => ({
    status: 200 as const,
    headers: { 'Set-Cookie': sessionCookie(signedIn.token, where), 'Cache-Control': 'no-store' },
    body: {
      success: true as const,
      message,
      data: await describe(
        { userId: signedIn.user.id, sessionId: signedIn.session.id, role: signedIn.membership.role, orgId: signedIn.membership.orgId, csrfToken: signedIn.csrfToken },
        signedIn.session.expiresAt,
      ),
    },
  });

  return {
    signIn: async ({ body, req }) => {
      checkOrigin(req, where);
      return started(await accounts.signIn({ email: body.email, password: body.password, clientAddress: clientAddress(req) }), 'Signed in');
    },
    acceptInvite: async ({ body, req }) => {
      checkOrigin(req, where);
      return started(await accounts.acceptInvite({ token: body.token, password: body.password, name: body.name, clientAddress: clientAddress(req) }), 'Invite accepted');
    },
    completePasswordReset: async ({ body, req }) => {
      checkOrigin(req, where);
      await accounts.completePasswordReset({ token: body.token, password: body.password, clientAddress: clientAddress(req) });
      return { status: 204, body: undefined };
    },
    redeemSignInLink: async ({ body, req }) => {
      checkOrigin(req, where);
      return started(await accounts.redeemSignInLink({ token: body.token, clientAddress: clientAddress(req) }), 'Signed in');
    },
    getConsoleSession: async ({ auth }) => ({
      status: 200,
      headers: { 'Cache-Control': 'no-store' },
      body: { success: true, message: 'OK', data: await describe(auth, auth.expiresAt) },
    }),
    switchOrganization: async ({ auth, body, req }) => started(await accounts.switchOrganization(auth, body.orgId, clientAddress(req)), 'Organization switched'),
    signOut: async ({ auth }) => {
      await accounts.signOut(auth);
      return { status: 204, body: undefined, headers: { 'Set-Cookie': clearedSessionCookie(where) } };
    },
    signOutEverywhere: async ({ auth, req }) => {
      await accounts.signOutEverywhere(auth, clientAddress(req));
      return { status: 204, body: undefined, headers: { 'Set-Cookie': clearedSessionCookie(where) } };
    },

    listConsoleApiKeys: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await orgs.listApiKeys(auth.orgId)).map(presentKey) } }),
    createConsoleApiKey: async ({ auth, body, req }) => {
      // A key never exceeds its creator: at most the API-key permissions of their role.
      const allowed = keyPermissionsOf(auth.role);
      const wanted = body?.permissions ?? allowed;
      const beyond = wanted.filter((p) => !allowed.includes(p));
      if (beyond.length > 0) throw forbidden(`The role "${auth.role}" cannot give a key the permission(s) ${beyond.map((p) => `"${p}"`).join(', ')}`);
      const key = await orgs.createApiKey(auth.orgId, { name: body?.name, permissions: wanted, createdBy: `user:${auth.userId}` });
      await audit.record({ orgId: auth.orgId, actor: auth.actor, action: 'api_key.create', target: { type: 'api_key', id: key.id }, summary: `created "${key.name}" with ${wanted.join(', ')}`, clientAddress: clientAddress(req) });
      return { status: 201, headers: { 'Cache-Control': 'no-store' }, body: { success: true, message: 'API key created; store it now, it is not shown again', data: { ...presentKey(key), key: key.key } } };
    },
    revokeConsoleApiKey: async ({ auth, params, req }) => {
      const key = await orgs.revokeApiKey(params.id, auth.orgId);
      await audit.record({ orgId: auth.orgId, actor: auth.actor, action: 'api_key.revoke', target: { type: 'api_key', id: key.id }, summary: `revoked "${key.name}"`, clientAddress: clientAddress(req) });
      return { status: 200, body: { success: true, message: 'API key revoked', data: presentKey(key) } };
    },

    listMembers: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await accounts.listMembers(auth.orgId)).map(presentMember) } }),
    updateMemberRole: async ({ auth, params, body, req }) => ({
      status: 200,
      body: { success: true, message: 'Role changed', data: presentMember(await accounts.changeRole(auth, params.id, body.role, clientAddress(req))) },
    }),
    removeMember: async ({ auth, params, req }) => {
      await accounts.removeMember(auth, params.id, clientAddress(req));
      return { status: 204, body: undefined };
    },
    listInvites: async ({ auth }) => {
      const now = clock.now();
      return { status: 200, body: { success: true, message: 'OK', data: (await accounts.listInvites(auth.orgId)).map((l) => presentInvite(l, now)) } };
    },
    createInvite: async ({ auth, body, req }) => {
      const issued = await accounts.invite({ orgId: auth.orgId, email: body.email, role: body.role, by: { type: 'user', id: auth.userId, role: auth.role }, clientAddress: clientAddress(req) });
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: { success: true, message: 'Invite created; send the link, it is not shown again', data: { ...presentInvite(issued.link, clock.now()), url: issued.url } },
      };
    },
    revokeInvite: async ({ auth, params, req }) => ({
      status: 200,
      body: { success: true, message: 'Invite revoked', data: presentInvite(await accounts.revokeInvite(auth.orgId, params.id, auth.actor, clientAddress(req)), clock.now()) },
    }),
    listAuditLog: async ({ auth, query }) => {
      const p = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await audit.list(auth.orgId, p, size);
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentAudit), total, p, size) } };
    },
  };
}

const OrgServiceName = (org: { displayName: string | null; name: string }) => org.displayName ?? org.name;

