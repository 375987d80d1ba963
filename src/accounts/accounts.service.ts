/**
 * People of an organization: users, memberships with a role, password sign-in with throttling,
 * server-side console sessions, and single-use links (invites, password resets, one-time sign-in
 * links). One service whichever door a request came through (console session, admin API / CLI).
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { sha256Hex } from '../kernel/secrets.js';
import { AppError, conflict, forbidden, notFound, unauthorized, validationError } from '../kernel/errors.js';
import type { OrgService, MerchantAuth, Actor } from '../orgs/orgs.service.js';
import type { Organization } from '../orgs/orgs.repository.js';
import type { AccountLink, AccountRepository, ConsoleSession, LinkKind, Member, Membership, SessionStrength, User, UserWithPassword } from './accounts.repository.js';
import { ROLES, ROLE_PERMISSIONS, mayGrant, type MemberPermission, type Role } from './roles.js';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, dummyHash, hashPassword, verifyPassword } from './passwords.js';
import type { AuditLog } from './audit.service.js';
import type { AuthenticationOptions, PasskeyService, RegistrationOptions } from './passkeys.service.js';
import type { OrganizationSecurity, Passkey } from './passkeys.repository.js';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Session lifetimes: signed out after 2 hours without a request, and 12 hours after sign-in whatever happens. */
export const SESSION_IDLE_MS = 2 * HOUR;
export const SESSION_ABSOLUTE_MS = 12 * HOUR;
/** last_seen_at is written at most once a minute per session (idle expiry is that coarse). */
const TOUCH_EVERY_MS = MINUTE;

export const LINK_TTL_MS: Record<LinkKind, number> = { invite: 7 * 24 * HOUR, password_reset: HOUR, sign_in: 15 * MINUTE };
const LINK_PREFIX: Record<LinkKind, string> = { invite: 'kinv_', password_reset: 'krst_', sign_in: 'ksil_' };
/** Where the console takes each link; the token travels in the fragment, which browsers never send to a server (no log can hold it). */
const LINK_PATH: Record<LinkKind, string> = { invite: '/console/accept-invite', password_reset: '/console/reset-password', sign_in: '/console/sign-in-link' };

/** Password guessing: per account (e-mail address, known or not) and per client address, in a 15-minute window. */
export const THROTTLE_WINDOW_MS = 15 * MINUTE;
export const ACCOUNT_FAILURE_LIMIT = 5;
export const ADDRESS_FAILURE_LIMIT = 20;

/** Session strengths that satisfy an organization's second-factor requirement: a passkey was used (or enrolled) in them. */
const SECOND_FACTOR_STRENGTHS: ReadonlySet<SessionStrength> = new Set(['password_passkey', 'passkey', 'link_passkey']);
export const satisfiesSecondFactor = (strength: SessionStrength): boolean => SECOND_FACTOR_STRENGTHS.has(strength);
/** How the audit log says a session was signed in. */
export const STRENGTH_TEXT: Record<SessionStrength, string> = {
  password: 'a password',
  password_passkey: 'a password and a passkey',
  passkey: 'a passkey',
  link: 'a one-time link',
  link_passkey: 'a one-time link, then enrolled a passkey',
};
/** The strength a session gets when it enrolls the account's first passkey. */
const ENROLLED: Partial<Record<SessionStrength, SessionStrength>> = { password: 'password_passkey', link: 'link_passkey' };

const secondFactorRequired = (message: string) => new AppError('SECOND_FACTOR_REQUIRED', message);

const SESSION_TOKEN = /^kss_[A-Za-z0-9_-]{43}$/;
const LINK_TOKEN = /^k(inv|rst|sil)_[A-Za-z0-9_-]{43}$/;

/** What a console request runs as: an organization, the member's permissions, and who they are. */
export interface SessionAuth extends MerchantAuth {
  userId: string;
  sessionId: string;
  role: Role;
  memberPermissions: MemberPermission[];
  /** A new session token when this request rotated the session (the member's role changed): the cookie to set. */
  rotatedToken?: string;
  /** The CSRF token of the session (derived from its token; see csrfTokenOf). */
  csrfToken: string;
  /** The session's absolute expiry. */
  expiresAt: Date;
  /** How the session was authenticated. */
  strength: SessionStrength;
  /**
   * The organization requires a second factor and the user has no passkey: the session may only
   * register one (operations marked `x-second-factor-setup`), read itself and sign out.
   */
  restricted: boolean;
}

/** The password was right, and the account has a passkey: the sign-in ends with it (no session yet). */
export interface SecondFactorPending extends AuthenticationOptions {
  kind: 'second_factor';
}

/**
 * Sends account e-mails (the operator's SMTP server, when SMTP_URL is set). Resolves true when the
 * server accepted the message; never rejects, never logs the link.
 */
export interface AccountMailer {
  sendInvite(input: { orgId: string; to: string; url: string; role: Role; expiresAt: Date }): Promise<boolean>;
}

export interface SignedIn {
  token: string;
  csrfToken: string;
  session: ConsoleSession;
  user: User;
  membership: Membership;
  organization: Organization;
}

/**
 * Credentials a member makes in the console (API keys, telemetry keys, agents' keys), each kept
 * with its maker (`user:USR_…`): they die with the membership (issue 37, item 7). Those made by
 * the operator (admin API / CLI) belong to no member and stay.
 */
export interface MemberCredentials {
  kind: 'apiKeys' | 'telemetryKeys' | 'agents';
  /** A member whose new role lacks this permission loses them too; null: limited at each request instead (API keys). */
  permission: MemberPermission | null;
  revokeCreatedBy(orgId: string, createdBy: string): Promise<Array<{ id: string; name: string }>>;
}

/** What went with a removed member (or with a demoted member's lost permissions). */
export interface RevokedWithMember {
  sessions: number;
  apiKeys: Array<{ id: string; name: string }>;
  telemetryKeys: Array<{ id: string; name: string }>;
  agents: Array<{ id: string; name: string }>;
  invites: AccountLink[];
}

const newToken = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;

/**
 * The CSRF token of a session: SHA-256 of its token under a label. The console sends it in
 * `X-CSRF-Token`; it is derived, not stored, and says nothing of the session token.
 */
export const csrfTokenOf = (sessionToken: string): string => sha256Hex(`kassa-csrf:${sessionToken}`);

const normalizeEmail = (email: string) => email.trim();

function checkPassword(password: string): void {
  if ([...password].length < MIN_PASSWORD_LENGTH) throw validationError(`body.password must be at least ${MIN_PASSWORD_LENGTH} characters`, { field: 'password' });
  if ([...password].length > MAX_PASSWORD_LENGTH) throw validationError(`body.password must be at most ${MAX_PASSWORD_LENGTH} characters`, { field: 'password' });
}

const rateLimited = (retryAfterMs: number, what = 'failed sign-ins') => {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return new AppError('RATE_LIMITED', `Too many ${what}; retry after ${seconds} s`, { headers: { 'Retry-After': String(seconds) } });
};

/**
 * Passwordless sign-in options store a challenge per call: at most this many per client address,
 * and in all, per THROTTLE_WINDOW_MS (openapi/console.yaml createPasskeySignInOptions).
 */
export const PASSKEY_OPTIONS_ADDRESS_LIMIT = 30;
export const PASSKEY_OPTIONS_GLOBAL_LIMIT = 3000;

export class AccountService {
  constructor(
    private readonly repo: AccountRepository,
    private readonly orgs: OrgService,
    private readonly audit: AuditLog,
    private readonly clock: Clock,
    private readonly publicBaseUrl: string,
    private readonly passkeys: PasskeyService,
    private readonly credentials: readonly MemberCredentials[] = [],
    /** Undefined without SMTP_URL: invite links then reach the invitee only through the operator. */
    private readonly mailer?: AccountMailer,
  ) {}

  // ---- sign-in -------------------------------------------------------------------------------

  /**
   * Password sign-in. An unknown e-mail address gets the same answer, after the same work (a
   * dummy hash is verified), as a wrong password; both count towards the same throttles. An
   * account with a passkey does not get a session yet: the answer is a second-factor challenge.
   */
  async signIn(input: { email: string; password: string; orgId?: string; clientAddress: string | null }): Promise<SignedIn | SecondFactorPending> {
    const now = this.clock.now();
    const email = normalizeEmail(input.email);
    const accountKey = `account:${email.toLowerCase()}`;
    const addressKey = `address:${input.clientAddress ?? 'unknown'}`;
    // Each attempt is reserved (counted) before its password is verified: of concurrent guesses,
    // no more than the limit are ever verified (test/accounts/sign-in-throttle-race.test.ts).
    await this.reserveAttempt(addressKey, ADDRESS_FAILURE_LIMIT, now);
    let attempt: number;
    try {
      attempt = await this.reserveAttempt(accountKey, ACCOUNT_FAILURE_LIMIT, now);
    } catch (error) {
      // Refused before any work: not an attempt of this address.
      await this.repo.releaseAttempt(addressKey, now, THROTTLE_WINDOW_MS);
      throw error;
    }
    const user = await this.repo.findUserByEmail(email);
    const valid = await verifyPassword(user?.passwordHash ?? (await dummyHash()), input.password);
    if (!user || !user.passwordHash || !valid) {
      // The reservations stand: they are the failures. A known account's organizations see them.
      if (user) await this.auditFailedSignIn(user.id, attempt, input.clientAddress);
      throw unauthorized('Invalid e-mail address or password');
    }
    await this.repo.clearFailures(accountKey);
    await this.repo.releaseAttempt(addressKey, now, THROTTLE_WINDOW_MS);
    const membership = await this.pickMembership(user.id, input.orgId);
    if ((await this.passkeys.list(user.id)).length > 0) {
      return { kind: 'second_factor', ...(await this.passkeys.secondFactorOptions(user.id, membership.orgId)) };
    }
    const signedIn = await this.startSession(user, membership, input.clientAddress, 'password');
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'session.sign_in', target: { type: 'session', id: signedIn.session.id }, summary: 'signed in with a password', clientAddress: input.clientAddress });
    return signedIn;
  }

  /** One attempt of a throttle key's window, or 429 when the window's limit is reached; the attempt's number. */
  private async reserveAttempt(key: string, limit: number, now: Date, what?: string): Promise<number> {
    const reserved = await this.repo.reserveAttempt(key, limit, now, THROTTLE_WINDOW_MS);
    if ('limited' in reserved) throw rateLimited(reserved.limited.getTime() + THROTTLE_WINDOW_MS - now.getTime(), what);
    return reserved.count;
  }

  /**
   * A wrong password for a known account, in the audit log of each of its organizations (never
   * the password); the failure that reaches the limit also records the lockout. Bounded by the
   * throttle: at most ACCOUNT_FAILURE_LIMIT entries per account and window. Unknown addresses
   * belong to no organization and are not recorded.
   */
  private async auditFailedSignIn(userId: string, attempt: number, clientAddress: string | null): Promise<void> {
    const minutes = THROTTLE_WINDOW_MS / MINUTE;
    const entry = { actor: { type: 'system' as const }, target: { type: 'user', id: userId }, clientAddress };
    await this.auditEveryOrganization(userId, { ...entry, action: 'session.sign_in_failed', summary: `failed password sign-in (attempt ${attempt} of ${ACCOUNT_FAILURE_LIMIT} in ${minutes} minutes)` });
    if (attempt === ACCOUNT_FAILURE_LIMIT) {
      await this.auditEveryOrganization(userId, { ...entry, action: 'account.locked', summary: `password sign-in locked for ${minutes} minutes after ${ACCOUNT_FAILURE_LIMIT} failed attempts` });
    }
  }

  private async checkThrottle(key: string, limit: number, now: Date): Promise<void> {
    const state = await this.repo.failures(key, now, THROTTLE_WINDOW_MS);
    if (state && state.count >= limit) throw rateLimited(state.windowStartedAt.getTime() + THROTTLE_WINDOW_MS - now.getTime());
  }

  private async pickMembership(userId: string, orgId?: string): Promise<Membership> {
    const memberships = await this.repo.membershipsOf(userId);
    const chosen = orgId ? memberships.find((m) => m.orgId === orgId) : memberships[0];
    if (!chosen) {
      if (orgId) throw notFound('Organization');
      throw forbidden('This account is not a member of any organization');
    }
    return chosen;
  }

  private async startSession(user: UserWithPassword | User, membership: Membership, clientAddress: string | null, strength: SessionStrength, expiresAt?: Date): Promise<SignedIn> {
    const now = this.clock.now();
    const token = newToken('kss_');
    const session: ConsoleSession = {
      id: newId('SES'),
      userId: user.id,
      orgId: membership.orgId,
      createdAt: now,
      lastSeenAt: now,
      expiresAt: expiresAt ?? new Date(now.getTime() + SESSION_ABSOLUTE_MS),
      revokedAt: null,
      clientAddress,
      strength,
    };
    await this.repo.insertSession(session, sha256Hex(token));
    const organization = await this.orgs.getOrganization(membership.orgId);
    const { passwordHash: _hash, ...plainUser } = user as UserWithPassword;
    return { token, csrfToken: csrfTokenOf(token), session, user: plainUser, membership, organization };
  }

  /**
   * Resolves the session cookie to the same kind of principal an API key gives (organization,
   * permissions, actor). Refused when unknown, revoked, idle too long, past its absolute expiry,
   * or when the user is no longer a member. A session older than the member's last role change is
   * rotated: a new token (the cookie the answer sets), the old one revoked.
   */
  async authenticateSession(presented: string | undefined, requiredPermission?: string, options: { secondFactorSetup?: boolean } = {}): Promise<SessionAuth> {
    if (!presented || !SESSION_TOKEN.test(presented)) throw unauthorized('Missing or invalid API key or console session');
    const now = this.clock.now();
    const session = await this.repo.findSessionByTokenHash(sha256Hex(presented));
    const refused = unauthorized('The console session has expired or was signed out; sign in again');
    if (!session || session.revokedAt || !session.role) throw refused;
    if (now >= session.expiresAt || now.getTime() - session.lastSeenAt.getTime() >= SESSION_IDLE_MS) throw refused;
    let token = presented;
    let sessionId = session.id;
    let rotatedToken: string | undefined;
    if (session.roleChangedAt && session.roleChangedAt > session.createdAt) {
      // Only one of two concurrent requests rotates; the other's old token is refused from now on.
      if (!(await this.repo.revokeSession(session.id, now))) throw refused;
      const user = await this.repo.findUser(session.userId);
      const membership = user && (await this.repo.findMembership(session.orgId, session.userId));
      if (!user || !membership) throw refused;
      const rotated = await this.startSession(user, membership, session.clientAddress, session.strength, session.expiresAt);
      token = rotatedToken = rotated.token;
      sessionId = rotated.session.id;
    } else if (now.getTime() - session.lastSeenAt.getTime() >= TOUCH_EVERY_MS) {
      await this.repo.touchSession(session.id, now);
    }
    // A session of an organization that requires a second factor is restricted unless a passkey
    // was used (or enrolled) in it: an account's passkey alone proves nothing about this session.
    const restricted = session.secondFactorRequired && !satisfiesSecondFactor(session.strength);
    if (restricted && !options.secondFactorSetup) {
      throw secondFactorRequired(
        session.hasPasskey
          ? 'This organization requires a second factor: sign in again with your passkey'
          : 'This organization requires a second factor: register a passkey (POST /v1/console/passkeys/registration-options) before anything else',
      );
    }
    const memberPermissions = [...ROLE_PERMISSIONS[session.role]];
    if (requiredPermission && !(memberPermissions as string[]).includes(requiredPermission)) {
      throw forbidden(`The role "${session.role}" lacks the permission "${requiredPermission}"`);
    }
    const organization = await this.orgs.getOrganization(session.orgId);
    return {
      orgId: session.orgId,
      apiKeyId: sessionId,
      permissions: memberPermissions,
      organization,
      actor: { type: 'user', id: session.userId, sessionId },
      userId: session.userId,
      sessionId,
      role: session.role,
      memberPermissions,
      rotatedToken,
      csrfToken: csrfTokenOf(token),
      expiresAt: session.expiresAt,
      strength: session.strength,
      restricted,
    };
  }

  async describeSession(auth: Pick<SessionAuth, 'userId' | 'orgId' | 'strength'>) {
    const user = await this.repo.findUser(auth.userId);
    if (!user) throw unauthorized('The console session has expired or was signed out; sign in again');
    const memberships = await this.repo.membershipsOf(auth.userId);
    const { passwordHash: _hash, ...plainUser } = user;
    const required = (await this.passkeys.repository.security(auth.orgId)).requireSecondFactor;
    const enrolled = (await this.passkeys.list(auth.userId)).length > 0;
    return { user: plainUser, memberships, secondFactor: { required, enrolled, restricted: required && !satisfiesSecondFactor(auth.strength) } };
  }

  async signOut(auth: SessionAuth): Promise<void> {
    await this.repo.revokeSession(auth.sessionId, this.clock.now());
  }

  /** Revokes every session of the user, in every organization ("sign out everywhere"). */
  async signOutEverywhere(auth: SessionAuth, clientAddress: string | null): Promise<number> {
    const count = await this.repo.revokeSessionsOfUser(auth.userId, this.clock.now());
    await this.audit.record({ orgId: auth.orgId, actor: auth.actor, action: 'session.sign_out_everywhere', target: { type: 'user', id: auth.userId }, summary: `revoked ${count} session(s)`, clientAddress });
    return count;
  }

  /**
   * Moves the console to another organization of the user: a new session (rotation) of the same
   * strength, the old one revoked, the arrival in the target organization's audit log. An
   * organization that requires a second factor is entered only by a session in which a passkey
   * was used, when the account has one (403 SECOND_FACTOR_REQUIRED); an account without a passkey
   * arrives restricted, as its password sign-in there would.
   */
  async switchOrganization(auth: SessionAuth, orgId: string, clientAddress: string | null): Promise<SignedIn> {
    const membership = await this.repo.findMembership(orgId, auth.userId);
    if (!membership) throw notFound('Organization');
    const user = await this.repo.findUser(auth.userId);
    if (!user) throw unauthorized();
    await this.checkSecondFactorToEnter(orgId, auth.userId, auth.strength);
    await this.repo.revokeSession(auth.sessionId, this.clock.now());
    const signedIn = await this.startSession(user, membership, clientAddress, auth.strength);
    await this.audit.record({
      orgId,
      actor: { type: 'user', id: user.id },
      action: 'session.switch_in',
      target: { type: 'session', id: signedIn.session.id },
      summary: `switched in from ${auth.orgId}; signed in with ${STRENGTH_TEXT[auth.strength]}`,
      clientAddress,
    });
    return signedIn;
  }

  /** An organization that requires a second factor is entered by a session that used the account's passkey. */
  private async checkSecondFactorToEnter(orgId: string, userId: string, strength: SessionStrength): Promise<void> {
    if (satisfiesSecondFactor(strength)) return;
    if (!(await this.passkeys.repository.security(orgId)).requireSecondFactor) return;
    if ((await this.passkeys.list(userId)).length === 0) return;
    throw secondFactorRequired('This organization requires a second factor: sign in with your passkey (or your password and passkey), then try again');
  }

  // ---- single-use links ----------------------------------------------------------------------

  private async issueLink(kind: LinkKind, fields: { orgId: string | null; userId: string | null; email: string; role: Role | null; createdBy: Actor | { type: 'operator' } }) {
    const now = this.clock.now();
    const token = newToken(LINK_PREFIX[kind]);
    const link: AccountLink = {
      id: newId('LNK'),
      kind,
      orgId: fields.orgId,
      userId: fields.userId,
      email: fields.email,
      role: fields.role,
      createdBy: fields.createdBy.type === 'operator' ? 'operator' : `${fields.createdBy.type}:${fields.createdBy.id}`,
      createdAt: now,
      expiresAt: new Date(now.getTime() + LINK_TTL_MS[kind]),
      usedAt: null,
      revokedAt: null,
    };
    await this.repo.insertLink(link, sha256Hex(token));
    return { link, token, url: `${this.publicBaseUrl.replace(/\/+$/, '')}${LINK_PATH[kind]}#token=${token}` };
  }

  private async consume(kind: LinkKind, token: string): Promise<AccountLink> {
    const link = LINK_TOKEN.test(token) ? await this.repo.consumeLink(kind, sha256Hex(token), this.clock.now()) : undefined;
    // Unknown, used, revoked and expired links look alike to the holder.
    if (!link) throw notFound('Link (it may have been used already or expired)');
    return link;
  }

  /**
   * Invites an e-mail address to an organization with a role. By a member: only roles they may
   * grant (an admin never makes owners). By the operator (admin API / CLI): any role. The link
   * proves control of the address, so it goes to the mailbox (e-mailed when SMTP is configured)
   * and never to a member who invites: only the operator is shown it (issue 37 item 3).
   */
  async invite(input: { orgId: string; email: string; role: Role; by: { type: 'operator' } | { type: 'user'; id: string; role: Role } ; clientAddress: string | null }) {
    await this.orgs.getOrganization(input.orgId);
    if (input.by.type === 'user' && !mayGrant(input.by.role, input.role)) throw forbidden(`The role "${input.by.role}" cannot invite a member with the role "${input.role}"`);
    const email = normalizeEmail(input.email);
    const user = await this.repo.findUserByEmail(email);
    if (user && (await this.repo.findMembership(input.orgId, user.id))) throw conflict('This e-mail address is already a member of the organization');
    const actor = input.by.type === 'operator' ? ({ type: 'operator' } as const) : ({ type: 'user', id: input.by.id } as const);
    const issued = await this.issueLink('invite', { orgId: input.orgId, userId: null, email, role: input.role, createdBy: actor });
    await this.audit.record({ orgId: input.orgId, actor, action: 'invite.create', target: { type: 'invite', id: issued.link.id }, summary: `invited ${email} as ${input.role}`, clientAddress: input.clientAddress });
    const emailed = await this.mailInvite(issued.link, issued.url);
    return { ...issued, emailed };
  }

  private async mailInvite(link: AccountLink, url: string): Promise<boolean> {
    if (!this.mailer) return false;
    return this.mailer.sendInvite({ orgId: link.orgId!, to: link.email, url, role: link.role!, expiresAt: link.expiresAt });
  }

  /**
   * The operator's copy of a pending invite's link (admin API / CLI), for instances without
   * outgoing e-mail: a new token replaces the old one (the previous link stops working).
   */
  async reissueInviteLink(orgId: string, inviteId: string, clientAddress: string | null) {
    const token = newToken(LINK_PREFIX.invite);
    const link = await this.repo.replaceInviteToken(orgId, inviteId, sha256Hex(token), this.clock.now());
    if (!link) throw notFound('Pending invite');
    await this.audit.record({ orgId, actor: { type: 'operator' }, action: 'invite.link', target: { type: 'invite', id: link.id }, summary: `issued a new link for the invite of ${link.email}`, clientAddress });
    return { link, url: `${this.publicBaseUrl.replace(/\/+$/, '')}${LINK_PATH.invite}#token=${token}` };
  }

  listInvites(orgId: string): Promise<AccountLink[]> {
    return this.repo.listInvites(orgId);
  }

  async revokeInvite(orgId: string, id: string, actor: Actor, clientAddress: string | null): Promise<AccountLink> {
    const link = await this.repo.revokeInvite(orgId, id, this.clock.now());
    if (!link) throw notFound('Invite');
    await this.audit.record({ orgId, actor, action: 'invite.revoke', target: { type: 'invite', id }, summary: `revoked the invite of ${link.email}`, clientAddress });
    return link;
  }

  /**
   * Accepts an invite (issue 37 items 1, 4, 9, 13, 15). It never signs in an existing account:
   * - with a console session (`session`), the signed-in user accepts as themselves, when the
   *   invite is for their address (403 otherwise); the session moves to the organization with
   *   its strength, and an organization that requires a second factor is entered only as
   *   switching into it would be (403 SECOND_FACTOR_REQUIRED);
   * - without one, the invite creates a new account with the password given. For an address
   *   that has an account (with a password or none, as the development demo owner) the answer
   *   is 401: sign in first (with that sign-in's throttles and second factor), then accept.
   * The password's rule is checked before anything is looked up (one answer whether or not the
   * address has an account), and the link is spent only once everything else holds.
   */
  async acceptInvite(input: { token: string; password?: string; name?: string; session?: SessionAuth; clientAddress: string | null }): Promise<SignedIn> {
    const now = this.clock.now();
    if (input.session) return this.acceptInviteAs(input.session, input.token, input.clientAddress);
    if (input.password === undefined) throw validationError('body.password is required to create an account (12 to 256 characters); an address that has an account signs in first', { field: 'password' });
    checkPassword(input.password);
    const live = LINK_TOKEN.test(input.token) ? await this.repo.findLiveLink('invite', sha256Hex(input.token), now) : undefined;
    if (!live) throw notFound('Link (it may have been used already or expired)');
    if (await this.repo.findUserByEmail(live.email)) throw unauthorized('This e-mail address has an account: sign in to it first, then open the invite link again');
    const passwordHash = await hashPassword(input.password);
    // The link is spent with the account's creation, in one transaction: two invites of one new
    // address accepted at once make one account, and the other invite stays live (sign in, then accept).
    const joined = await this.repo.joinAsNewUser(sha256Hex(input.token), now, { id: newId('USR'), name: input.name?.trim() || null, passwordHash, createdAt: now, updatedAt: now });
    if (joined === undefined) throw notFound('Link (it may have been used already or expired)');
    if (joined === 'account_exists') throw unauthorized('This e-mail address has an account: sign in to it first, then open the invite link again');
    const { link, user, membership } = joined;
    const signedIn = await this.startSession(user, membership, input.clientAddress, 'link');
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'member.join', target: { type: 'user', id: user.id }, summary: `accepted the invite ${link.id} as ${membership.role}; a new account, signed in with ${STRENGTH_TEXT.link}`, clientAddress: input.clientAddress });
    return signedIn;
  }

  private async acceptInviteAs(auth: SessionAuth, token: string, clientAddress: string | null): Promise<SignedIn> {
    const live = LINK_TOKEN.test(token) ? await this.repo.findLiveLink('invite', sha256Hex(token), this.clock.now()) : undefined;
    if (!live) throw notFound('Link (it may have been used already or expired)');
    const user = await this.repo.findUser(auth.userId);
    if (!user) throw unauthorized('The console session has expired or was signed out; sign in again');
    if (user.email.toLowerCase() !== live.email.toLowerCase()) throw forbidden('This invite is for another e-mail address: sign out, then open the invite link again');
    if (await this.repo.findMembership(live.orgId!, user.id)) throw conflict('This account is already a member of the organization');
    await this.checkSecondFactorToEnter(live.orgId!, user.id, auth.strength);
    const link = await this.consume('invite', token);
    const now = this.clock.now();
    const membership: Membership = { orgId: link.orgId!, userId: user.id, role: link.role!, createdAt: now, roleChangedAt: now };
    if ((await this.repo.insertMembership(membership)) === 'exists') throw conflict('This account is already a member of the organization');
    await this.repo.revokeSession(auth.sessionId, now);
    const signedIn = await this.startSession(user, membership, clientAddress, auth.strength);
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'member.join', target: { type: 'user', id: user.id }, summary: `accepted the invite ${link.id} as ${membership.role}; signed in with ${STRENGTH_TEXT[auth.strength]}`, clientAddress });
    return signedIn;
  }

  /**
   * A password reset link for an account (the operator's CLI prints it), with what else can sign
   * in to the account: its passkeys and live sessions, which the operator may remove at the same
   * time (`removePasskeys`, `revokeSessions`): a reset handed to the address's owner must not
   * leave someone else's passkey on the account (issue 37 item 3).
   */
  async createPasswordReset(email: string, clientAddress: string | null, options: { removePasskeys?: boolean; revokeSessions?: boolean } = {}) {
    const user = await this.repo.findUserByEmail(normalizeEmail(email));
    if (!user) throw notFound('User');
    const now = this.clock.now();
    const issued = await this.issueLink('password_reset', { orgId: null, userId: user.id, email: user.email, role: null, createdBy: { type: 'operator' } });
    const removedPasskeys = options.removePasskeys ? await this.passkeys.repository.deleteAllPasskeys(user.id) : 0;
    const revokedSessions = options.revokeSessions ? await this.repo.revokeSessionsOfUser(user.id, now) : 0;
    const passkeys = await this.passkeys.list(user.id);
    const sessions = await this.repo.liveSessionsOfUser(user.id, now);
    const removed = [removedPasskeys ? `removed ${removedPasskeys} passkey(s)` : '', revokedSessions ? `revoked ${revokedSessions} session(s)` : ''].filter(Boolean).join('; ');
    await this.audit.record({ orgId: null, actor: { type: 'operator' }, action: 'password_reset.create', target: { type: 'user', id: user.id }, summary: `issued a password reset link${removed ? `; ${removed}` : ''}`, clientAddress });
    if (removed) {
      for (const m of await this.repo.membershipsOf(user.id)) {
        await this.audit.record({ orgId: m.orgId, actor: { type: 'operator' }, action: 'password_reset.create', target: { type: 'user', id: user.id }, summary: `issued a password reset link; ${removed}`, clientAddress });
      }
    }
    return { ...issued, user, passkeys, sessions, removedPasskeys, revokedSessions };
  }

  /** Sets a new password from a reset link; every session of the account is signed out. */
  async completePasswordReset(input: { token: string; password: string; clientAddress: string | null }): Promise<void> {
    checkPassword(input.password);
    const link = await this.consume('password_reset', input.token);
    const now = this.clock.now();
    await this.repo.setPassword(link.userId!, await hashPassword(input.password), now);
    await this.repo.revokeSessionsOfUser(link.userId!, now);
    await this.repo.clearFailures(`account:${link.email.toLowerCase()}`);
    for (const m of await this.repo.membershipsOf(link.userId!)) {
      await this.audit.record({ orgId: m.orgId, actor: { type: 'user', id: link.userId! }, action: 'password_reset.complete', target: { type: 'user', id: link.userId! }, summary: 'set a new password; every session signed out', clientAddress: input.clientAddress });
    }
  }

  /** A one-time sign-in link for a member (first run on the embedded database in development). */
  async createSignInLink(orgId: string, userId: string) {
    const user = await this.repo.findUser(userId);
    if (!user) throw notFound('User');
    return this.issueLink('sign_in', { orgId, userId, email: user.email, role: null, createdBy: { type: 'operator' } });
  }

  async redeemSignInLink(input: { token: string; clientAddress: string | null }): Promise<SignedIn> {
    const link = await this.consume('sign_in', input.token);
    const user = await this.repo.findUser(link.userId!);
    const membership = user && (await this.repo.findMembership(link.orgId!, user.id));
    if (!user || !membership) throw notFound('Link (it may have been used already or expired)');
    // A link is one factor: it never signs in an account that has a passkey (spent all the same,
    // as it will never work for this account).
    if ((await this.passkeys.list(user.id)).length > 0) throw secondFactorRequired('This account has a passkey: sign in with it (a one-time link does not ask for it)');
    const signedIn = await this.startSession(user, membership, input.clientAddress, 'link');
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'session.sign_in', target: { type: 'session', id: signedIn.session.id }, summary: 'signed in with a one-time link', clientAddress: input.clientAddress });
    return signedIn;
  }

  /** Makes (or finds) a user and makes them a member; the demo organization's owner on first run. */
  async ensureMember(orgId: string, email: string, role: Role, name?: string): Promise<{ user: User; membership: Membership }> {
    const now = this.clock.now();
    let user: UserWithPassword | undefined = await this.repo.findUserByEmail(email);
    if (!user) {
      user = { id: newId('USR'), email, name: name ?? null, passwordHash: null, createdAt: now, updatedAt: now };
      await this.repo.insertUser(user);
    }
    await this.repo.insertMembership({ orgId, userId: user.id, role, createdAt: now, roleChangedAt: now });
    const membership = (await this.repo.findMembership(orgId, user.id))!;
    const { passwordHash: _hash, ...plainUser } = user;
    return { user: plainUser, membership };
  }

  // ---- passkeys and the second factor --------------------------------------------------------

  /** Ends a password sign-in with the account's passkey: a session, as a password sign-in without a passkey gets one. */
  async completeSecondFactor(input: { challengeId: string; credential: AuthenticationResponseJSON; clientAddress: string | null }): Promise<SignedIn> {
    const now = this.clock.now();
    const addressKey = `address:${input.clientAddress ?? 'unknown'}`;
    await this.checkThrottle(addressKey, ADDRESS_FAILURE_LIMIT, now);
    const challenge = await this.passkeys.consume(input.challengeId, 'second_factor');
    const failed = unauthorized('Passkey sign-in failed: sign in with the password again');
    if (!challenge || !challenge.userId || !challenge.orgId) {
      await this.repo.recordFailure(addressKey, now, THROTTLE_WINDOW_MS);
      throw failed;
    }
    const user = await this.repo.findUser(challenge.userId);
    const accountKey = user ? `account:${user.email.toLowerCase()}` : null;
    try {
      await this.passkeys.authenticate(challenge, input.credential);
    } catch (error) {
      await this.repo.recordFailure(addressKey, now, THROTTLE_WINDOW_MS);
      if (accountKey) await this.repo.recordFailure(accountKey, now, THROTTLE_WINDOW_MS);
      throw error;
    }
    const membership = user && (await this.repo.findMembership(challenge.orgId, user.id));
    if (!user || !membership) throw failed;
    const signedIn = await this.startSession(user, membership, input.clientAddress, 'password_passkey');
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'session.sign_in', target: { type: 'session', id: signedIn.session.id }, summary: 'signed in with a password and a passkey', clientAddress: input.clientAddress });
    return signedIn;
  }

  /**
   * Options of a passwordless sign-in: the same for every caller (no e-mail address asked, nothing
   * to enumerate). Unauthenticated and storing a challenge each, so budgeted per client address
   * and in all (issue 37, item 14); the address's budget is taken first, so one address spends
   * at most its own share of the global one.
   */
  async passkeySignInOptions(clientAddress: string | null): Promise<AuthenticationOptions> {
    const now = this.clock.now();
    const what = 'passkey sign-in requests';
    await this.reserveAttempt(`passkey_options:address:${clientAddress ?? 'unknown'}`, PASSKEY_OPTIONS_ADDRESS_LIMIT, now, what);
    await this.reserveAttempt('passkey_options:all', PASSKEY_OPTIONS_GLOBAL_LIMIT, now, what);
    return this.passkeys.signInOptions();
  }

  /**
   * Passwordless sign-in: a discoverable passkey with user verification is both factors, so it
   * satisfies an organization's second-factor requirement. Same session rules as a password sign-in.
   */
  async signInWithPasskey(input: { challengeId: string; credential: AuthenticationResponseJSON; orgId?: string; clientAddress: string | null }): Promise<SignedIn> {
    const now = this.clock.now();
    const addressKey = `address:${input.clientAddress ?? 'unknown'}`;
    await this.checkThrottle(addressKey, ADDRESS_FAILURE_LIMIT, now);
    const challenge = await this.passkeys.consume(input.challengeId, 'sign_in');
    let passkey: Passkey;
    try {
      if (!challenge) throw unauthorized('Passkey sign-in failed: request new options and try again');
      passkey = await this.passkeys.authenticate(challenge, input.credential);
    } catch (error) {
      await this.repo.recordFailure(addressKey, now, THROTTLE_WINDOW_MS);
      throw error;
    }
    const user = await this.repo.findUser(passkey.userId);
    if (!user) throw unauthorized('Passkey sign-in failed: request new options and try again');
    const membership = await this.pickMembership(user.id, input.orgId);
    const signedIn = await this.startSession(user, membership, input.clientAddress, 'passkey');
    await this.audit.record({ orgId: membership.orgId, actor: { type: 'user', id: user.id }, action: 'session.sign_in', target: { type: 'session', id: signedIn.session.id }, summary: `signed in with the passkey ${passkey.id}`, clientAddress: input.clientAddress });
    return signedIn;
  }

  async passkeyRegistrationOptions(auth: SessionAuth): Promise<RegistrationOptions> {
    const user = await this.repo.findUser(auth.userId);
    if (!user) throw unauthorized('The console session has expired or was signed out; sign in again');
    await this.checkMayAddPasskey(auth);
    return this.passkeys.registrationOptions(user);
  }

  /**
   * An account's first passkey may be added by any of its sessions (enrollment); another one only
   * by a session in which a passkey was used, so a session without the second factor cannot give
   * itself one. Returns whether this is the first.
   */
  private async checkMayAddPasskey(auth: SessionAuth): Promise<boolean> {
    const first = (await this.passkeys.list(auth.userId)).length === 0;
    if (!first && !satisfiesSecondFactor(auth.strength)) throw secondFactorRequired('This account has a passkey: sign in with it before adding another');
    return first;
  }

  listPasskeys(auth: SessionAuth): Promise<Passkey[]> {
    return this.passkeys.list(auth.userId);
  }

  /** Adds a passkey to the signed-in user; recorded in the audit log of each of their organizations. */
  async registerPasskey(auth: SessionAuth, input: { challengeId: string; credential: RegistrationResponseJSON; name?: string }, clientAddress: string | null): Promise<Passkey> {
    const first = await this.checkMayAddPasskey(auth);
    const passkey = await this.passkeys.register(auth.userId, input);
    // The session that enrolls the account's first passkey has used it: it now satisfies a requirement.
    const raised = ENROLLED[auth.strength];
    if (first && raised) await this.repo.raiseSessionStrength(auth.sessionId, auth.strength, raised);
    await this.auditEveryOrganization(auth.userId, { actor: auth.actor, action: 'passkey.add', target: { type: 'passkey', id: passkey.id }, summary: `added the passkey "${passkey.name}"`, clientAddress });
    return passkey;
  }

  /**
   * Removes one of the user's own passkeys (another user's is 404). The last one stays while an
   * organization of the user requires a second factor (409), as GitHub keeps 2FA on then.
   */
  async removePasskey(auth: SessionAuth, id: string, clientAddress: string | null): Promise<void> {
    // The rule is checked inside the deletion's transaction, under a lock on the user's passkeys
    // (an owner switching the requirement on at the same moment: test/accounts/passkey-requirement-race.test.ts).
    const removed = await this.passkeys.remove(auth.userId, id);
    if (removed === undefined) throw notFound('Passkey');
    if (removed === 'last') throw conflict('An organization of this account requires a second factor: register another passkey before removing the last one');
    await this.auditEveryOrganization(auth.userId, { actor: auth.actor, action: 'passkey.remove', target: { type: 'passkey', id: removed.id }, summary: `removed the passkey "${removed.name}"`, clientAddress });
  }

  async organizationSecurity(orgId: string): Promise<OrganizationSecurity & { membersWithoutPasskey: Array<{ userId: string; email: string; role: string }> }> {
    const repo = this.passkeyRepo();
    return { ...(await repo.security(orgId)), membersWithoutPasskey: await repo.membersWithoutPasskey(orgId) };
  }

  /**
   * Turns the organization's second-factor requirement on or off: owners only (as on GitHub), and
   * an owner turning it on must have a passkey already (nobody locks themselves into a restricted
   * session). Members without a passkey get restricted sessions from their next request on.
   */
  async setRequireSecondFactor(auth: SessionAuth, required: boolean, clientAddress: string | null) {
    if (auth.role !== 'owner') throw forbidden('Only an owner can change whether the organization requires a second factor');
    const repo = this.passkeyRepo();
    const before = await repo.security(auth.orgId);
    const noPasskey = () => conflict('Register a passkey yourself before requiring a second factor of every member');
    if (required && (await this.passkeys.list(auth.userId)).length === 0) throw noPasskey();
    if (before.requireSecondFactor !== required) {
      // Checked again under a lock on the owner's passkeys, as they may be removing the last one right now.
      if ((await repo.setRequireSecondFactor(auth.orgId, required, auth.userId, this.clock.now())) === 'no_passkey') throw noPasskey();
      await this.audit.record({
        orgId: auth.orgId,
        actor: auth.actor,
        action: 'organization.second_factor_requirement',
        target: { type: 'organization', id: auth.orgId },
        summary: required ? 'now requires a second factor (passkey) of every member' : 'no longer requires a second factor',
        clientAddress,
      });
    }
    return this.organizationSecurity(auth.orgId);
  }

  private passkeyRepo() {
    return this.passkeys.repository;
  }

  private async auditEveryOrganization(userId: string, entry: Omit<Parameters<AuditLog['record']>[0], 'orgId'>) {
    for (const m of await this.repo.membershipsOf(userId)) await this.audit.record({ ...entry, orgId: m.orgId });
  }

  // ---- members -------------------------------------------------------------------------------

  async listMembers(orgId: string): Promise<Member[]> {
    return this.repo.listMembers(orgId);
  }

  /**
   * Changes a member's role. Their sessions are rotated on their next request (the role is read
   * on every request, so the new permissions apply at once). An admin neither grants nor changes
   * the owner role; the last owner cannot be demoted.
   */
  async changeRole(auth: { orgId: string; role: Role; actor: Actor }, userId: string, role: Role, clientAddress: string | null): Promise<Member> {
    const current = await this.repo.findMembership(auth.orgId, userId);
    if (!current) throw notFound('Member');
    if (!mayGrant(auth.role, role) || !mayGrant(auth.role, current.role)) throw forbidden(`The role "${auth.role}" cannot change a member from "${current.role}" to "${role}"`);
    const changed = await this.repo.changeMembership(auth.orgId, userId, role, this.clock.now());
    if (changed === undefined || changed === 'removed') throw notFound('Member');
    if (changed === 'last_owner') throw conflict('The organization must keep at least one owner');
    // Their API keys are limited to the new role from the next request (read with the key).
    this.orgs.forgetCachedKeys();
    const revoked = current.role === role ? undefined : await this.revokeBeyondRole(auth.orgId, userId, role);
    await this.audit.record({ orgId: auth.orgId, actor: auth.actor, action: 'member.role_change', target: { type: 'user', id: userId }, summary: `role ${current.role} → ${role}${revoked ? describeRevoked(revoked) : ''}`, clientAddress });
    return (await this.repo.listMembers(auth.orgId)).find((m) => m.userId === userId)!;
  }

  /**
   * A demoted member keeps nothing their new role could not make: pending invites of roles it
   * cannot grant (issue 37, item 8), telemetry keys and agents' keys whose permission it lacks.
   */
  private async revokeBeyondRole(orgId: string, userId: string, role: Role): Promise<RevokedWithMember> {
    const createdBy = `user:${userId}`;
    const revoked: RevokedWithMember = { sessions: 0, apiKeys: [], telemetryKeys: [], agents: [], invites: [] };
    for (const c of this.credentials) {
      if (c.permission && !ROLE_PERMISSIONS[role].includes(c.permission)) revoked[c.kind] = await c.revokeCreatedBy(orgId, createdBy);
    }
    const ungrantable = ROLES.filter((r) => !mayGrant(role, r));
    if (ungrantable.length > 0) revoked.invites = await this.repo.revokePendingInvitesBy(orgId, createdBy, this.clock.now(), ungrantable);
    return revoked;
  }

  /**
   * Removes a member; what they held in this organization goes with them at once: their sessions,
   * the API keys, telemetry keys and agents' keys they made in the console, and their pending
   * invites. The answer lists it.
   */
  async removeMember(auth: { orgId: string; role: Role; actor: Actor }, userId: string, clientAddress: string | null): Promise<{ userId: string; role: Role; revoked: RevokedWithMember }> {
    const current = await this.repo.findMembership(auth.orgId, userId);
    if (!current) throw notFound('Member');
    if (!mayGrant(auth.role, current.role)) throw forbidden(`The role "${auth.role}" cannot remove a member with the role "${current.role}"`);
    const now = this.clock.now();
    const changed = await this.repo.changeMembership(auth.orgId, userId, null, now);
    if (changed === undefined) throw notFound('Member');
    if (changed === 'last_owner') throw conflict('The organization must keep at least one owner');
    const createdBy = `user:${userId}`;
    const revoked: RevokedWithMember = { sessions: await this.repo.revokeSessionsOfUser(userId, now, auth.orgId), apiKeys: [], telemetryKeys: [], agents: [], invites: [] };
    for (const c of this.credentials) revoked[c.kind] = await c.revokeCreatedBy(auth.orgId, createdBy);
    revoked.invites = await this.repo.revokePendingInvitesBy(auth.orgId, createdBy, now);
    await this.audit.record({ orgId: auth.orgId, actor: auth.actor, action: 'member.remove', target: { type: 'user', id: userId }, summary: `removed (${current.role}); ${revoked.sessions} session(s) revoked${describeRevoked(revoked)}`, clientAddress });
    return { userId, role: current.role, revoked };
  }
}

/** The audit summary's tail: what was revoked with a member, by id (names are the member's words, ids are enough). */
function describeRevoked(r: RevokedWithMember): string {
  const parts = [
    r.apiKeys.length > 0 ? `API keys ${r.apiKeys.map((k) => k.id).join(', ')}` : '',
    r.telemetryKeys.length > 0 ? `telemetry keys ${r.telemetryKeys.map((k) => k.id).join(', ')}` : '',
    r.agents.length > 0 ? `agents ${r.agents.map((a) => a.id).join(', ')}` : '',
    r.invites.length > 0 ? `invites ${r.invites.map((l) => l.id).join(', ')}` : '',
  ].filter(Boolean);
  return parts.length > 0 ? `; revoked ${parts.join('; ')}` : '';
}
