/** Users, memberships, console sessions, single-use links, sign-in throttling and the audit log. The only knex user of this domain. */
import type { Db } from '../db/knex.js';
import type { Role } from './roles.js';

export interface User {
  id: string;
  email: string;
  name: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface UserWithPassword extends User {
  passwordHash: string | null;
}

export interface Membership {
  orgId: string;
  userId: string;
  role: Role;
  createdAt: Date;
  roleChangedAt: Date;
}

export interface Member extends Membership {
  email: string;
  name: string | null;
}

/**
 * How a console session was authenticated: a password, a password then a passkey, a passkey
 * alone (user verification: both factors), a one-time link (sign-in link, invite), or a link
 * session that enrolled the account's first passkey. Kept for the session's life, carried over
 * by organization switches and rotations.
 */
export type SessionStrength = 'password' | 'password_passkey' | 'passkey' | 'link' | 'link_passkey';

export interface ConsoleSession {
  id: string;
  userId: string;
  orgId: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  clientAddress: string | null;
  strength: SessionStrength;
}

/** A session as authentication reads it: with the member's current role (null: no longer a member). */
export interface SessionWithRole extends ConsoleSession {
  role: Role | null;
  roleChangedAt: Date | null;
  /** The organization requires a second factor (src/accounts/passkeys.service.ts). */
  secondFactorRequired: boolean;
  /** The user has at least one passkey. */
  hasPasskey: boolean;
}

export type LinkKind = 'invite' | 'password_reset' | 'sign_in';

export interface AccountLink {
  id: string;
  kind: LinkKind;
  orgId: string | null;
  userId: string | null;
  email: string;
  role: Role | null;
  createdBy: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
  revokedAt: Date | null;
}

/** `customer`: a buyer in the customer portal (a session nobody else opened for them; migration 0263). */
export type ActorType = 'user' | 'api_key' | 'operator' | 'system' | 'customer';

export interface AuditEntry {
  id: string;
  orgId: string | null;
  actorType: ActorType;
  actorId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  summary: string;
  clientAddress: string | null;
  createdAt: Date;
}

export interface AccountRepository {
  insertUser(user: UserWithPassword): Promise<void>;
  findUserByEmail(email: string): Promise<UserWithPassword | undefined>;
  findUser(id: string): Promise<UserWithPassword | undefined>;
  setPassword(userId: string, passwordHash: string, now: Date): Promise<void>;

  /** 'exists' when the user is already a member of the organization. */
  insertMembership(membership: Membership): Promise<'inserted' | 'exists'>;
  findMembership(orgId: string, userId: string): Promise<Membership | undefined>;
  membershipsOf(userId: string): Promise<Membership[]>;
  listMembers(orgId: string): Promise<Member[]>;
  /**
   * Changes a role, or removes the membership (role null), unless that leaves the organization
   * without an owner. Serialized per organization (its owners' rows are locked first).
   */
  changeMembership(orgId: string, userId: string, role: Role | null, now: Date): Promise<Membership | 'last_owner' | 'removed' | undefined>;

  insertSession(session: ConsoleSession, tokenHash: string): Promise<void>;
  findSessionByTokenHash(tokenHash: string): Promise<SessionWithRole | undefined>;
  touchSession(id: string, now: Date): Promise<void>;
  /** Revokes one session if it is still live; false when it was not (already revoked: a concurrent rotation). */
  revokeSession(id: string, now: Date): Promise<boolean>;
  revokeSessionsOfUser(userId: string, now: Date, orgId?: string): Promise<number>;
  /** Raises a live session's strength from `from` to `to` (a passkey enrolled in it); false when it was not `from`. */
  raiseSessionStrength(id: string, from: SessionStrength, to: SessionStrength): Promise<boolean>;
  /** The user's sessions that are neither revoked nor past their absolute expiry. */
  liveSessionsOfUser(userId: string, now: Date): Promise<ConsoleSession[]>;

  insertLink(link: AccountLink, tokenHash: string): Promise<void>;
  /** Marks a live link of that kind used and returns it; undefined when unknown, used, revoked or expired. One caller wins. */
  consumeLink(kind: LinkKind, tokenHash: string, now: Date): Promise<AccountLink | undefined>;
  /**
   * Spends a live invite and creates its new account and membership, in one transaction: when the
   * address got an account meanwhile (another invite accepted at the same moment) nothing is
   * spent or created ('account_exists'); undefined when the link is not live.
   */
  joinAsNewUser(tokenHash: string, now: Date, user: Omit<UserWithPassword, 'email'>): Promise<{ link: AccountLink; user: UserWithPassword; membership: Membership } | 'account_exists' | undefined>;
  /** A live link of that kind (not used, revoked or expired), without spending it. */
  findLiveLink(kind: LinkKind, tokenHash: string, now: Date): Promise<AccountLink | undefined>;
  /** Replaces the token of a pending invite of the organization (the old link stops working); undefined when not pending. */
  replaceInviteToken(orgId: string, id: string, tokenHash: string, now: Date): Promise<AccountLink | undefined>;
  listInvites(orgId: string): Promise<AccountLink[]>;
  revokeInvite(orgId: string, id: string, now: Date): Promise<AccountLink | undefined>;
  /** Revokes the organization's pending invites made by `createdBy` (`user:…`), of the given roles (all when omitted); those revoked. */
  revokePendingInvitesBy(orgId: string, createdBy: string, now: Date, roles?: readonly Role[]): Promise<AccountLink[]>;

  /**
   * Reserves one attempt in a throttle key's window before anything is verified (a new window once
   * the old one is over), in one conditional statement: of concurrent callers, only as many as the
   * limit allows get a reservation. The count with this attempt, or 'limited' with the window's start.
   */
  reserveAttempt(key: string, limit: number, now: Date, windowMs: number): Promise<{ count: number } | { limited: Date }>;
  /** Gives back one reserved attempt of the current window (a success that is not counted against the key). */
  releaseAttempt(key: string, now: Date, windowMs: number): Promise<void>;
  /** Adds a failure to a throttle key's window (a new window once the old one is over); the count in the window. */
  recordFailure(key: string, now: Date, windowMs: number): Promise<number>;
  failures(key: string, now: Date, windowMs: number): Promise<{ count: number; windowStartedAt: Date } | undefined>;
  clearFailures(key: string): Promise<void>;

  /**
   * Removes what is past keeping, at most `limit` rows of each kind: audit entries older than
   * `auditBefore`, sessions ended or expired before `endedBefore`, links spent, revoked or expired
   * before it, and sign-in failure windows that ended before it. The number of rows removed.
   */
  removeExpired(auditBefore: Date, endedBefore: Date, limit: number): Promise<number>;
  insertAudit(entry: AuditEntry): Promise<void>;
  listAudit(orgId: string, page: { offset: number; limit: number }): Promise<{ records: AuditEntry[]; total: number }>;
}

interface UserRow {
  id: string;
  email: string;
  name: string | null;
  password_hash: string | null;
  created_at: Date;
  updated_at: Date;
}
interface MembershipRow {
  org_id: string;
  user_id: string;
  role: Role;
  created_at: Date;
  role_changed_at: Date;
}
interface SessionRow {
  id: string;
  token_hash: string;
  user_id: string;
  org_id: string;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  client_address: string | null;
  strength: SessionStrength;
}
interface LinkRow {
  id: string;
  kind: LinkKind;
  token_hash: string;
  org_id: string | null;
  user_id: string | null;
  email: string;
  role: Role | null;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
}
interface AuditRow {
  id: string;
  org_id: string | null;
  actor_type: ActorType;
  actor_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  summary: string;
  client_address: string | null;
  created_at: Date;
}

const date = (value: Date | string) => new Date(value);
const dateOrNull = (value: Date | string | null) => (value === null ? null : new Date(value));

const toUser = (row: UserRow): UserWithPassword => ({
  id: row.id,
  email: row.email,
  name: row.name,
  passwordHash: row.password_hash,
  createdAt: date(row.created_at),
  updatedAt: date(row.updated_at),
});
const toMembership = (row: MembershipRow): Membership => ({
  orgId: row.org_id,
  userId: row.user_id,
  role: row.role,
  createdAt: date(row.created_at),
  roleChangedAt: date(row.role_changed_at),
});
const toSession = (row: SessionRow): ConsoleSession => ({
  id: row.id,
  userId: row.user_id,
  orgId: row.org_id,
  createdAt: date(row.created_at),
  lastSeenAt: date(row.last_seen_at),
  expiresAt: date(row.expires_at),
  revokedAt: dateOrNull(row.revoked_at),
  clientAddress: row.client_address,
  strength: row.strength,
});
const toLink = (row: LinkRow): AccountLink => ({
  id: row.id,
  kind: row.kind,
  orgId: row.org_id,
  userId: row.user_id,
  email: row.email,
  role: row.role,
  createdBy: row.created_by,
  createdAt: date(row.created_at),
  expiresAt: date(row.expires_at),
  usedAt: dateOrNull(row.used_at),
  revokedAt: dateOrNull(row.revoked_at),
});
const toAudit = (row: AuditRow): AuditEntry => ({
  id: row.id,
  orgId: row.org_id,
  actorType: row.actor_type,
  actorId: row.actor_id,
  action: row.action,
  targetType: row.target_type,
  targetId: row.target_id,
  summary: row.summary,
  clientAddress: row.client_address,
  createdAt: date(row.created_at),
});

const NEWEST_FIRST = [
  { column: 'created_at', order: 'desc' },
  { column: 'id', order: 'desc' },
] as const;

export class KnexAccountRepository implements AccountRepository {
  constructor(private readonly db: Db) {}

  async insertUser(user: UserWithPassword): Promise<void> {
    await this.db<UserRow>('users').insert({
      id: user.id,
      email: user.email,
      name: user.name,
      password_hash: user.passwordHash,
      created_at: user.createdAt,
      updated_at: user.updatedAt,
    });
  }

  async findUserByEmail(email: string): Promise<UserWithPassword | undefined> {
    const row = await this.db<UserRow>('users').whereRaw('lower(email) = lower(?)', [email]).first();
    return row ? toUser(row) : undefined;
  }

  async findUser(id: string): Promise<UserWithPassword | undefined> {
    const row = await this.db<UserRow>('users').where({ id }).first();
    return row ? toUser(row) : undefined;
  }

  async setPassword(userId: string, passwordHash: string, now: Date): Promise<void> {
    await this.db<UserRow>('users').where({ id: userId }).update({ password_hash: passwordHash, updated_at: now });
  }

  async insertMembership(m: Membership): Promise<'inserted' | 'exists'> {
    const rows = await this.db<MembershipRow>('memberships')
      .insert({ org_id: m.orgId, user_id: m.userId, role: m.role, created_at: m.createdAt, role_changed_at: m.roleChangedAt })
      .onConflict(['org_id', 'user_id'])
      .ignore()
      .returning('user_id');
    return rows.length > 0 ? 'inserted' : 'exists';
  }

  async findMembership(orgId: string, userId: string): Promise<Membership | undefined> {
    const row = await this.db<MembershipRow>('memberships').where({ org_id: orgId, user_id: userId }).first();
    return row ? toMembership(row) : undefined;
  }

  async membershipsOf(userId: string): Promise<Membership[]> {
    const rows = await this.db<MembershipRow>('memberships').where({ user_id: userId }).orderBy([{ column: 'created_at' }, { column: 'org_id' }]);
    return rows.map(toMembership);
  }

  async listMembers(orgId: string): Promise<Member[]> {
    const rows = await this.db('memberships as m')
      .join('users as u', 'u.id', 'm.user_id')
      .where('m.org_id', orgId)
      .select<Array<MembershipRow & { email: string; name: string | null }>>('m.*', 'u.email', 'u.name')
      .orderBy([{ column: 'm.created_at', order: 'desc' }, { column: 'm.user_id', order: 'desc' }]);
    return rows.map((row) => ({ ...toMembership(row), email: row.email, name: row.name }));
  }

  async changeMembership(orgId: string, userId: string, role: Role | null, now: Date): Promise<Membership | 'last_owner' | 'removed' | undefined> {
    return this.db.transaction(async (trx) => {
      // The organization's owners are locked first: two owners demoting each other at once are
      // serialized, and the second sees that the first is no longer an owner.
      const owners = await trx<MembershipRow>('memberships').where({ org_id: orgId, role: 'owner' }).forUpdate().select('user_id');
      const current = await trx<MembershipRow>('memberships').where({ org_id: orgId, user_id: userId }).forUpdate().first();
      if (!current) return undefined;
      if (current.role === 'owner' && role !== 'owner' && owners.length <= 1) return 'last_owner';
      if (role === null) {
        await trx('memberships').where({ org_id: orgId, user_id: userId }).delete();
        return 'removed';
      }
      if (current.role === role) return toMembership(current);
      const [row] = await trx<MembershipRow>('memberships')
        .where({ org_id: orgId, user_id: userId, role: current.role })
        .update({ role, role_changed_at: now })
        .returning('*');
      return toMembership(row as MembershipRow);
    });
  }

  async insertSession(s: ConsoleSession, tokenHash: string): Promise<void> {
    await this.db<SessionRow>('console_sessions').insert({
      id: s.id,
      token_hash: tokenHash,
      user_id: s.userId,
      org_id: s.orgId,
      created_at: s.createdAt,
      last_seen_at: s.lastSeenAt,
      expires_at: s.expiresAt,
      revoked_at: s.revokedAt,
      client_address: s.clientAddress,
      strength: s.strength,
    });
  }

  async findSessionByTokenHash(tokenHash: string): Promise<SessionWithRole | undefined> {
    const row = await this.db('console_sessions as s')
      .leftJoin('memberships as m', function on() {
        this.on('m.org_id', '=', 's.org_id').andOn('m.user_id', '=', 's.user_id');
      })
      .leftJoin('organization_security as o', 'o.org_id', 's.org_id')
      .where('s.token_hash', tokenHash)
      .select<Array<SessionRow & { role: Role | null; role_changed_at: Date | null; require_second_factor: boolean | null; has_passkey: boolean }>>(
        's.*',
        'm.role',
        'm.role_changed_at',
        'o.require_second_factor',
        this.db.raw('EXISTS (SELECT 1 FROM passkeys p WHERE p.user_id = s.user_id) AS has_passkey'),
      )
      .first();
    return row
      ? {
          ...toSession(row),
          role: row.role ?? null,
          roleChangedAt: dateOrNull(row.role_changed_at ?? null),
          secondFactorRequired: row.require_second_factor === true,
          hasPasskey: row.has_passkey === true,
        }
      : undefined;
  }

  async touchSession(id: string, now: Date): Promise<void> {
    await this.db<SessionRow>('console_sessions').where({ id }).whereNull('revoked_at').where('last_seen_at', '<', now).update({ last_seen_at: now });
  }

  async revokeSession(id: string, now: Date): Promise<boolean> {
    const count = await this.db<SessionRow>('console_sessions').where({ id }).whereNull('revoked_at').update({ revoked_at: now });
    return count > 0;
  }

  async revokeSessionsOfUser(userId: string, now: Date, orgId?: string): Promise<number> {
    const query = this.db<SessionRow>('console_sessions').where({ user_id: userId }).whereNull('revoked_at');
    if (orgId) query.where({ org_id: orgId });
    return query.update({ revoked_at: now });
  }

  async raiseSessionStrength(id: string, from: SessionStrength, to: SessionStrength): Promise<boolean> {
    const count = await this.db<SessionRow>('console_sessions').where({ id, strength: from }).whereNull('revoked_at').update({ strength: to });
    return count > 0;
  }

  async liveSessionsOfUser(userId: string, now: Date): Promise<ConsoleSession[]> {
    const rows = await this.db<SessionRow>('console_sessions').where({ user_id: userId }).whereNull('revoked_at').where('expires_at', '>', now).orderBy([...NEWEST_FIRST]);
    return rows.map(toSession);
  }

  async insertLink(link: AccountLink, tokenHash: string): Promise<void> {
    await this.db<LinkRow>('account_links').insert({
      id: link.id,
      kind: link.kind,
      token_hash: tokenHash,
      org_id: link.orgId,
      user_id: link.userId,
      email: link.email,
      role: link.role,
      created_by: link.createdBy,
      created_at: link.createdAt,
      expires_at: link.expiresAt,
      used_at: link.usedAt,
      revoked_at: link.revokedAt,
    });
  }

  async consumeLink(kind: LinkKind, tokenHash: string, now: Date): Promise<AccountLink | undefined> {
    const [row] = await this.db<LinkRow>('account_links')
      .where({ kind, token_hash: tokenHash })
      .whereNull('used_at')
      .whereNull('revoked_at')
      .where('expires_at', '>', now)
      .update({ used_at: now })
      .returning('*');
    return row ? toLink(row as LinkRow) : undefined;
  }

  async joinAsNewUser(tokenHash: string, now: Date, user: Omit<UserWithPassword, 'email'>): Promise<{ link: AccountLink; user: UserWithPassword; membership: Membership } | 'account_exists' | undefined> {
    const accountExists = new Error('account exists');
    try {
      return await this.db.transaction(async (trx) => {
        const [row] = await trx<LinkRow>('account_links')
          .where({ kind: 'invite', token_hash: tokenHash })
          .whereNull('used_at')
          .whereNull('revoked_at')
          .where('expires_at', '>', now)
          .update({ used_at: now })
          .returning('*');
        if (!row) return undefined;
        const link = toLink(row as LinkRow);
        // Any unique conflict is the address (lower(email)): a concurrent acceptance made the account.
        const inserted = await trx.raw(
          'INSERT INTO users (id, email, name, password_hash, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id',
          [user.id, link.email, user.name, user.passwordHash, user.createdAt, user.updatedAt],
        );
        if (inserted.rows.length === 0) throw accountExists;
        const membership: Membership = { orgId: link.orgId!, userId: user.id, role: link.role!, createdAt: now, roleChangedAt: now };
        await trx<MembershipRow>('memberships').insert({ org_id: membership.orgId, user_id: membership.userId, role: membership.role, created_at: now, role_changed_at: now });
        return { link, user: { ...user, email: link.email }, membership };
      });
    } catch (error) {
      if (error === accountExists) return 'account_exists';
      throw error;
    }
  }

  async findLiveLink(kind: LinkKind, tokenHash: string, now: Date): Promise<AccountLink | undefined> {
    const row = await this.db<LinkRow>('account_links')
      .where({ kind, token_hash: tokenHash })
      .whereNull('used_at')
      .whereNull('revoked_at')
      .where('expires_at', '>', now)
      .first();
    return row ? toLink(row) : undefined;
  }

  async replaceInviteToken(orgId: string, id: string, tokenHash: string, now: Date): Promise<AccountLink | undefined> {
    const [row] = await this.db<LinkRow>('account_links')
      .where({ org_id: orgId, id, kind: 'invite' })
      .whereNull('used_at')
      .whereNull('revoked_at')
      .where('expires_at', '>', now)
      .update({ token_hash: tokenHash })
      .returning('*');
    return row ? toLink(row as LinkRow) : undefined;
  }

  async listInvites(orgId: string): Promise<AccountLink[]> {
    const rows = await this.db<LinkRow>('account_links').where({ org_id: orgId, kind: 'invite' }).orderBy([...NEWEST_FIRST]);
    return rows.map(toLink);
  }

  async revokeInvite(orgId: string, id: string, now: Date): Promise<AccountLink | undefined> {
    await this.db<LinkRow>('account_links').where({ org_id: orgId, id, kind: 'invite' }).whereNull('used_at').whereNull('revoked_at').update({ revoked_at: now });
    const row = await this.db<LinkRow>('account_links').where({ org_id: orgId, id, kind: 'invite' }).first();
    return row ? toLink(row) : undefined;
  }

  async revokePendingInvitesBy(orgId: string, createdBy: string, now: Date, roles?: readonly Role[]): Promise<AccountLink[]> {
    const query = this.db<LinkRow>('account_links')
      .where({ org_id: orgId, kind: 'invite', created_by: createdBy })
      .whereNull('used_at')
      .whereNull('revoked_at')
      .where('expires_at', '>', now);
    if (roles) query.whereIn('role', [...roles]);
    const rows = await query.update({ revoked_at: now }).returning('*');
    return (rows as LinkRow[]).map(toLink);
  }

  async recordFailure(key: string, now: Date, windowMs: number): Promise<number> {
    const windowStart = new Date(now.getTime() - windowMs);
    // One statement: concurrent failures each count (the row is locked by the upsert).
    const result = await this.db.raw<{ rows: Array<{ failures: number }> }>(
      `INSERT INTO sign_in_failures (throttle_key, window_started_at, failures) VALUES (?, ?, 1)
       ON CONFLICT (throttle_key) DO UPDATE SET
         failures = CASE WHEN sign_in_failures.window_started_at <= ? THEN 1 ELSE sign_in_failures.failures + 1 END,
         window_started_at = CASE WHEN sign_in_failures.window_started_at <= ? THEN EXCLUDED.window_started_at ELSE sign_in_failures.window_started_at END
       RETURNING failures`,
      [key, now, windowStart, windowStart],
    );
    return Number(result.rows[0]!.failures);
  }

  async reserveAttempt(key: string, limit: number, now: Date, windowMs: number): Promise<{ count: number } | { limited: Date }> {
    const windowStart = new Date(now.getTime() - windowMs);
    // The row is locked by the upsert: concurrent reservations are serialized, and the WHERE of
    // the DO UPDATE is read after the lock, so no more than `limit` of them succeed per window.
    const result = await this.db.raw<{ rows: Array<{ failures: number }> }>(
      `INSERT INTO sign_in_failures (throttle_key, window_started_at, failures) VALUES (?, ?, 1)
       ON CONFLICT (throttle_key) DO UPDATE SET
         failures = CASE WHEN sign_in_failures.window_started_at <= ? THEN 1 ELSE sign_in_failures.failures + 1 END,
         window_started_at = CASE WHEN sign_in_failures.window_started_at <= ? THEN EXCLUDED.window_started_at ELSE sign_in_failures.window_started_at END
       WHERE sign_in_failures.window_started_at <= ? OR sign_in_failures.failures < ?
       RETURNING failures`,
      [key, now, windowStart, windowStart, windowStart, limit],
    );
    const row = result.rows[0];
    if (row) return { count: Number(row.failures) };
    const state = await this.failures(key, now, windowMs);
    return { limited: state?.windowStartedAt ?? now };
  }

  async releaseAttempt(key: string, now: Date, windowMs: number): Promise<void> {
    await this.db('sign_in_failures')
      .where({ throttle_key: key })
      .where('window_started_at', '>', new Date(now.getTime() - windowMs))
      .where('failures', '>', 0)
      .decrement('failures', 1);
  }

  async failures(key: string, now: Date, windowMs: number): Promise<{ count: number; windowStartedAt: Date } | undefined> {
    const row = await this.db('sign_in_failures').where({ throttle_key: key }).where('window_started_at', '>', new Date(now.getTime() - windowMs)).first();
    return row ? { count: Number(row.failures), windowStartedAt: date(row.window_started_at) } : undefined;
  }

  async clearFailures(key: string): Promise<void> {
    await this.db('sign_in_failures').where({ throttle_key: key }).delete();
  }

  async removeExpired(auditBefore: Date, endedBefore: Date, limit: number): Promise<number> {
    const batch = (table: string, column: string, where: (q: import('knex').Knex.QueryBuilder) => void) =>
      this.db(table).whereIn(column, (sub) => {
        sub.select(column).from(table);
        where(sub);
        sub.limit(limit);
      })
        .delete()
        .returning(column)
        .then((rows: unknown[]) => rows.length);
    const counts = await Promise.all([
      batch('audit_log', 'id', (q) => q.where('created_at', '<', auditBefore)),
      batch('console_sessions', 'id', (q) => q.where((w) => w.where('expires_at', '<', endedBefore).orWhere('revoked_at', '<', endedBefore))),
      batch('account_links', 'id', (q) => q.where((w) => w.where('expires_at', '<', endedBefore).orWhere('used_at', '<', endedBefore).orWhere('revoked_at', '<', endedBefore))),
      batch('sign_in_failures', 'throttle_key', (q) => q.where('window_started_at', '<', endedBefore)),
    ]);
    return counts.reduce((a, b) => a + b, 0);
  }

  async insertAudit(e: AuditEntry): Promise<void> {
    await this.db<AuditRow>('audit_log').insert({
      id: e.id,
      org_id: e.orgId,
      actor_type: e.actorType,
      actor_id: e.actorId,
      action: e.action,
      target_type: e.targetType,
      target_id: e.targetId,
      summary: e.summary,
      client_address: e.clientAddress,
      created_at: e.createdAt,
    });
  }

  async listAudit(orgId: string, page: { offset: number; limit: number }) {
    const rows = await this.db<AuditRow>('audit_log').where({ org_id: orgId }).orderBy([...NEWEST_FIRST]).offset(page.offset).limit(page.limit);
    const count = await this.db('audit_log').where({ org_id: orgId }).count<{ count: number }[]>({ count: '*' }).first();
    return { records: rows.map(toAudit), total: Number(count?.count ?? 0) };
  }
}
