/** The console document's operations (openapi/console.yaml): thin, the rules are in the services. */
import type { Request } from 'express';
import type { ConsoleHandlers } from '../handler-maps.js';
import type { Clock } from '../kernel/clock.js';
import { iso, isoOrNull, page } from '../kernel/present.js';
import { forbidden } from '../kernel/errors.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { ApiKey } from '../orgs/orgs.repository.js';
import { presentApiKey } from '../orgs/api-key.presenter.js';
import type { AccountService, SessionAuth, SignedIn } from './accounts.service.js';
import type { AccountLink, AuditEntry, Member, SessionStrength } from './accounts.repository.js';
import type { AuditLog } from './audit.service.js';
import type { Passkey } from './passkeys.repository.js';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { keyPermissionsOf, type Role } from './roles.js';
import { ROLE_PERMISSIONS } from './roles.js';
import { checkOrigin, clearedSessionCookie, optionalSession, readCookie, SESSION_COOKIE, sessionCookie, type ConsoleOrigin } from './request-auth.js';

export const clientAddress = (req: Request): string | null => req.ip ?? null;

const presentKey = (key: ApiKey) => ({
  ...presentApiKey(key),
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

type Transport = 'ble' | 'cable' | 'hybrid' | 'internal' | 'nfc' | 'smart-card' | 'usb';
const TRANSPORTS = new Set<string>(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);
const transports = (list: readonly string[] | undefined): Transport[] => (list ?? []).filter((t): t is Transport => TRANSPORTS.has(t));

const presentPasskey = (p: Passkey) => ({
  passkeyId: p.id,
  name: p.name,
  deviceType: p.deviceType,
  backedUp: p.backedUp,
  transports: transports(p.transports),
  createdAt: iso(p.createdAt),
  lastUsedAt: isoOrNull(p.lastUsedAt),
});

const presentSecurity = (s: Awaited<ReturnType<AccountService['organizationSecurity']>>) => ({
  requireSecondFactor: s.requireSecondFactor,
  updatedAt: isoOrNull(s.updatedAt),
  updatedBy: s.updatedBy,
  membersWithoutPasskey: s.membersWithoutPasskey.map((m) => ({ userId: m.userId, email: m.email, role: m.role as Role })),
});

const descriptors = (list: PublicKeyCredentialRequestOptionsJSON['allowCredentials']) =>
  list?.map((c) => ({ id: c.id, type: 'public-key' as const, ...(c.transports ? { transports: transports(c.transports) } : {}) }));

/** The library's options, as the contract names them (its types are wider than what it emits). */
const presentRequestOptions = (o: PublicKeyCredentialRequestOptionsJSON) => ({
  challenge: o.challenge,
  rpId: o.rpId!,
  ...(o.timeout !== undefined ? { timeout: o.timeout } : {}),
  ...(o.userVerification ? { userVerification: o.userVerification } : {}),
  ...(o.allowCredentials ? { allowCredentials: descriptors(o.allowCredentials) } : {}),
});

const presentCreationOptions = (o: PublicKeyCredentialCreationOptionsJSON) => ({
  challenge: o.challenge,
  rp: { name: o.rp.name, id: o.rp.id! },
  user: { id: o.user.id, name: o.user.name, displayName: o.user.displayName },
  pubKeyCredParams: o.pubKeyCredParams.map((p) => ({ alg: p.alg, type: 'public-key' as const })),
  ...(o.timeout !== undefined ? { timeout: o.timeout } : {}),
  ...(o.attestation ? { attestation: o.attestation } : {}),
  excludeCredentials: descriptors(o.excludeCredentials) ?? [],
  ...(o.authenticatorSelection ? { authenticatorSelection: o.authenticatorSelection } : {}),
  ...(o.extensions ? { extensions: { ...(o.extensions.credProps !== undefined ? { credProps: o.extensions.credProps } : {}) } } : {}),
  hints: (o.hints ?? []) as Array<'security-key' | 'client-device' | 'hybrid'>,
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

/** The console operations of the accounts domain (the other domains' are theirs: webhooks, telemetry, agent wallets). */
export type AccountConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'signIn' | 'acceptInvite' | 'completePasswordReset' | 'redeemSignInLink' | 'getConsoleSession' | 'switchOrganization' | 'signOut' | 'signOutEverywhere'
  | 'listConsoleApiKeys' | 'createConsoleApiKey' | 'revokeConsoleApiKey'
  | 'listMembers' | 'updateMemberRole' | 'removeMember' | 'listInvites' | 'createInvite' | 'revokeInvite' | 'listAuditLog'
  | 'completeSecondFactor' | 'createPasskeySignInOptions' | 'signInWithPasskey' | 'createPasskeyRegistrationOptions' | 'listPasskeys'
  | 'registerPasskey' | 'deletePasskey' | 'getOrganizationSecurity' | 'updateOrganizationSecurity'
>;

export function createConsoleHandlers(deps: { accounts: AccountService; orgs: OrgService; audit: AuditLog; clock: Clock; where: ConsoleOrigin }): AccountConsoleHandlers {
  const { accounts, orgs, audit, clock, where } = deps;

  const describe = async (auth: { userId: string; sessionId: string; role: Role; orgId: string; csrfToken: string; strength: SessionStrength }, expiresAt: Date) => {
    const { user, memberships, secondFactor } = await accounts.describeSession(auth);
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
      strength: auth.strength,
      secondFactor,
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
        { userId: signedIn.user.id, sessionId: signedIn.session.id, role: signedIn.membership.role, orgId: signedIn.membership.orgId, csrfToken: signedIn.csrfToken, strength: signedIn.session.strength },
        signedIn.session.expiresAt,
      ),
    },
  });

  return {
    signIn: async ({ body, req }) => {
      checkOrigin(req, where);
      const result = await accounts.signIn({ email: body.email, password: body.password, clientAddress: clientAddress(req) });
      if ('kind' in result) {
        return {
          status: 202 as const,
          headers: { 'Cache-Control': 'no-store' },
          body: { success: true as const, message: 'A passkey is required to finish signing in', data: { secondFactorRequired: true as const, challengeId: result.challengeId, publicKey: presentRequestOptions(result.publicKey) } },
        };
      }
      return started(result, 'Signed in');
    },

    completeSecondFactor: async ({ body, req }) => {
      checkOrigin(req, where);
      return started(await accounts.completeSecondFactor({ challengeId: body.challengeId, credential: body.credential as AuthenticationResponseJSON, clientAddress: clientAddress(req) }), 'Signed in');
    },
    createPasskeySignInOptions: async ({ req }) => {
      checkOrigin(req, where);
      const options = await accounts.passkeySignInOptions(clientAddress(req));
      return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: { success: true, message: 'OK', data: { challengeId: options.challengeId, publicKey: presentRequestOptions(options.publicKey) } } };
    },
    signInWithPasskey: async ({ body, req }) => {
      checkOrigin(req, where);
      return started(await accounts.signInWithPasskey({ challengeId: body.challengeId, credential: body.credential as AuthenticationResponseJSON, clientAddress: clientAddress(req) }), 'Signed in');
    },
    createPasskeyRegistrationOptions: async ({ auth }) => {
      const options = await accounts.passkeyRegistrationOptions(auth);
      return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: { success: true, message: 'OK', data: { challengeId: options.challengeId, publicKey: presentCreationOptions(options.publicKey) } } };
    },
    listPasskeys: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await accounts.listPasskeys(auth)).map(presentPasskey) } }),
    registerPasskey: async ({ auth, body, req }) => {
      const passkey = await accounts.registerPasskey(auth, { challengeId: body.challengeId, credential: body.credential as RegistrationResponseJSON, name: body.name }, clientAddress(req));
      return { status: 201, body: { success: true, message: 'Passkey added', data: presentPasskey(passkey) } };
    },
    deletePasskey: async ({ auth, params, req }) => {
      await accounts.removePasskey(auth, params.id, clientAddress(req));
      return { status: 204, body: undefined };
    },
    getOrganizationSecurity: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: presentSecurity(await accounts.organizationSecurity(auth.orgId)) } }),
    updateOrganizationSecurity: async ({ auth, body, req }) => ({
      status: 200,
      body: { success: true, message: 'Second-factor requirement updated', data: presentSecurity(await accounts.setRequireSecondFactor(auth, body.requireSecondFactor, clientAddress(req))) },
    }),
    acceptInvite: async ({ body, req }) => {
      checkOrigin(req, where);
      // A signed-in user accepts as themselves (the cookie, with its CSRF token); see AccountService.acceptInvite.
      const session = await optionalSession(req, accounts, where);
      return started(await accounts.acceptInvite({ token: body.token, password: body.password, name: body.name, session, clientAddress: clientAddress(req) }), 'Invite accepted');
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
    getConsoleSession: async ({ auth, req }) => {
      // Optional credentials (console.yaml): no live session is an answer, and a stale cookie goes.
      const session = auth as SessionAuth | undefined;
      if (!session) {
        const stale = readCookie(req, SESSION_COOKIE) !== undefined;
        return { status: 200, headers: { 'Cache-Control': 'no-store', ...(stale ? { 'Set-Cookie': clearedSessionCookie(where) } : {}) }, body: { success: true, message: 'Signed out', data: { signedIn: false } } };
      }
      return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: { success: true, message: 'OK', data: await describe(session, session.expiresAt) } };
    },
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
      const removed = await accounts.removeMember(auth, params.id, clientAddress(req));
      const now = clock.now();
      const { sessions, apiKeys, telemetryKeys, agents, invites } = removed.revoked;
      return {
        status: 200,
        body: {
          success: true,
          message: 'Member removed',
          data: { userId: removed.userId, role: removed.role, revoked: { sessions, apiKeys, telemetryKeys, agents, invites: invites.map((l) => presentInvite(l, now)) } },
        },
      };
    },
    listInvites: async ({ auth }) => {
      const now = clock.now();
      return { status: 200, body: { success: true, message: 'OK', data: (await accounts.listInvites(auth.orgId)).map((l) => presentInvite(l, now)) } };
    },
    createInvite: async ({ auth, body, req }) => {
      const issued = await accounts.invite({ orgId: auth.orgId, email: body.email, role: body.role, by: { type: 'user', id: auth.userId, role: auth.role }, clientAddress: clientAddress(req) });
      // The link proves control of the address: it goes to the mailbox, never to the inviter.
      const message = issued.emailed
        ? `Invite e-mailed to ${issued.link.email}`
        : `Invite created; this server sends no e-mail, so the operator gives the link to ${issued.link.email} (admin user invite-link --org ${auth.orgId} --invite ${issued.link.id})`;
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: { success: true, message, data: { ...presentInvite(issued.link, clock.now()), emailed: issued.emailed } },
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

