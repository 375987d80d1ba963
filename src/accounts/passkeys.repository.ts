/** Passkeys, WebAuthn ceremony challenges and organizations' second-factor switch. The only knex user of this part of the domain. */
import type { Knex } from 'knex';
import type { Db } from '../db/knex.js';

export type DeviceType = 'singleDevice' | 'multiDevice';

export interface Passkey {
  id: string;
  userId: string;
  /** The credential's id, base64url, as the authenticator gave it. */
  credentialId: string;
  /** The COSE public key, base64url. */
  publicKey: string;
  counter: number;
  transports: string[];
  deviceType: DeviceType;
  backedUp: boolean;
  name: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export type ChallengePurpose = 'registration' | 'sign_in' | 'second_factor';

export interface Challenge {
  purpose: ChallengePurpose;
  challenge: string;
  userId: string | null;
  orgId: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface OrganizationSecurity {
  orgId: string;
  requireSecondFactor: boolean;
  updatedAt: Date | null;
  updatedBy: string | null;
}

export interface PasskeyRepository {
  insertPasskey(passkey: Passkey): Promise<'inserted' | 'exists'>;
  listPasskeys(userId: string): Promise<Passkey[]>;
  /** The operator's removal of every passkey of an account (a password reset): no requirement keeps the last. The number removed. */
  deleteAllPasskeys(userId: string): Promise<number>;
  findPasskeyByCredentialId(credentialId: string): Promise<Passkey | undefined>;
  /**
   * Deletes one of the user's passkeys; refuses ('last') to delete the user's only passkey while an
   * organization of theirs requires a second factor. The user's passkeys are locked first and the
   * requirement is read after the lock, in the same transaction, so neither a concurrent deletion
   * nor an owner switching the requirement on (setRequireSecondFactor locks the same rows) can slip
   * between the check and the delete.
   */
  deletePasskey(userId: string, id: string): Promise<Passkey | 'last' | undefined>;
  /**
   * Records a use: the counter moves only forwards (a conditional update; false when another
   * request already moved it to this value or beyond, which is a replayed or cloned authenticator).
   */
  recordUse(id: string, expectedCounter: number, newCounter: number, now: Date): Promise<boolean>;

  insertChallenge(idHash: string, challenge: Challenge): Promise<void>;
  /** Spends a live challenge of that purpose: one caller wins; undefined when unknown, used or expired. */
  consumeChallenge(idHash: string, purpose: ChallengePurpose, now: Date): Promise<Challenge | undefined>;
  removeExpiredChallenges(before: Date, limit: number): Promise<number>;

  security(orgId: string): Promise<OrganizationSecurity>;
  /**
   * Sets the requirement. Turning it on needs a passkey of the user `byUserId` (the owner doing it):
   * their passkeys are locked (FOR SHARE) while the setting is written, so a concurrent deletion of
   * their last passkey either finishes first ('no_passkey') or sees the requirement and keeps it.
   */
  setRequireSecondFactor(orgId: string, required: boolean, byUserId: string, now: Date): Promise<OrganizationSecurity | 'no_passkey'>;
  /** Whether any organization the user belongs to requires a second factor. */
  anyMembershipRequiresSecondFactor(userId: string): Promise<boolean>;
  /** Members of the organization without a passkey. */
  membersWithoutPasskey(orgId: string): Promise<Array<{ userId: string; email: string; role: string }>>;
}

interface PasskeyRow {
  id: string;
  user_id: string;
  credential_id: string;
  public_key: string;
  counter: string | number;
  transports: string;
  device_type: DeviceType;
  backed_up: boolean;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}
interface ChallengeRow {
  id_hash: string;
  purpose: ChallengePurpose;
  challenge: string;
  user_id: string | null;
  org_id: string | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}
interface SecurityRow {
  org_id: string;
  require_second_factor: boolean;
  updated_at: Date;
  updated_by: string;
}

const toPasskey = (row: PasskeyRow): Passkey => ({
  id: row.id,
  userId: row.user_id,
  credentialId: row.credential_id,
  publicKey: row.public_key,
  counter: Number(row.counter),
  transports: JSON.parse(row.transports) as string[],
  deviceType: row.device_type,
  backedUp: row.backed_up,
  name: row.name,
  createdAt: new Date(row.created_at),
  lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
});
const toChallenge = (row: ChallengeRow): Challenge => ({
  purpose: row.purpose,
  challenge: row.challenge,
  userId: row.user_id,
  orgId: row.org_id,
  createdAt: new Date(row.created_at),
  expiresAt: new Date(row.expires_at),
});

/** Whether any organization the user belongs to requires a second factor (on `db` or a transaction). */
async function requiresSecondFactor(db: Knex | Knex.Transaction, userId: string): Promise<boolean> {
  const row = await db('memberships as m')
    .join('organization_security as s', 's.org_id', 'm.org_id')
    .where('m.user_id', userId)
    .where('s.require_second_factor', true)
    .first('m.org_id');
  return row !== undefined;
}

export class KnexPasskeyRepository implements PasskeyRepository {
  constructor(private readonly db: Db) {}

  async insertPasskey(p: Passkey): Promise<'inserted' | 'exists'> {
    const rows = await this.db<PasskeyRow>('passkeys')
      .insert({
        id: p.id,
        user_id: p.userId,
        credential_id: p.credentialId,
        public_key: p.publicKey,
        counter: p.counter,
        transports: JSON.stringify(p.transports),
        device_type: p.deviceType,
        backed_up: p.backedUp,
        name: p.name,
        created_at: p.createdAt,
        last_used_at: p.lastUsedAt,
      })
      .onConflict('credential_id')
      .ignore()
      .returning('id');
    return rows.length > 0 ? 'inserted' : 'exists';
  }

  async listPasskeys(userId: string): Promise<Passkey[]> {
    const rows = await this.db<PasskeyRow>('passkeys').where({ user_id: userId }).orderBy([{ column: 'created_at' }, { column: 'id' }]);
    return rows.map(toPasskey);
  }

  async findPasskeyByCredentialId(credentialId: string): Promise<Passkey | undefined> {
    const row = await this.db<PasskeyRow>('passkeys').where({ credential_id: credentialId }).first();
    return row ? toPasskey(row) : undefined;
  }

  async deletePasskey(userId: string, id: string): Promise<Passkey | 'last' | undefined> {
    return this.db.transaction(async (trx) => {
      const mine = await trx<PasskeyRow>('passkeys').where({ user_id: userId }).forUpdate().select('*');
      const target = mine.find((row) => row.id === id);
      if (!target) return undefined;
      // Read after the lock (a new snapshot under READ COMMITTED): a requirement switched on by a
      // transaction that held these rows is visible here.
      if (mine.length <= 1 && (await requiresSecondFactor(trx, userId))) return 'last';
      await trx('passkeys').where({ id, user_id: userId }).delete();
      return toPasskey(target);
    });
  }

  async deleteAllPasskeys(userId: string): Promise<number> {
    const rows: unknown[] = await this.db('passkeys').where({ user_id: userId }).delete().returning('id');
    return rows.length;
  }

  async recordUse(id: string, expectedCounter: number, newCounter: number, now: Date): Promise<boolean> {
    // Authenticators that keep no counter report 0 every time (synced passkeys); those cannot regress.
    const query = this.db<PasskeyRow>('passkeys').where({ id });
    if (newCounter === 0 && expectedCounter === 0) query.where({ counter: 0 });
    else query.where('counter', '<', newCounter).where({ counter: expectedCounter });
    const count = await query.update({ counter: newCounter, last_used_at: now });
    return count > 0;
  }

  async insertChallenge(idHash: string, c: Challenge): Promise<void> {
    await this.db<ChallengeRow>('webauthn_challenges').insert({
      id_hash: idHash,
      purpose: c.purpose,
      challenge: c.challenge,
      user_id: c.userId,
      org_id: c.orgId,
      created_at: c.createdAt,
      expires_at: c.expiresAt,
      used_at: null,
    });
  }

  async consumeChallenge(idHash: string, purpose: ChallengePurpose, now: Date): Promise<Challenge | undefined> {
    // Deleted as it is spent (one DELETE wins): a used challenge is never kept.
    const [row] = await this.db<ChallengeRow>('webauthn_challenges')
      .where({ id_hash: idHash, purpose })
      .whereNull('used_at')
      .where('expires_at', '>', now)
      .delete()
      .returning('*');
    return row ? toChallenge(row as ChallengeRow) : undefined;
  }

  async removeExpiredChallenges(before: Date, limit: number): Promise<number> {
    const rows = await this.db('webauthn_challenges')
      .whereIn('id_hash', (sub) => sub.select('id_hash').from('webauthn_challenges').where('expires_at', '<', before).limit(limit))
      .delete()
      .returning('id_hash');
    return rows.length;
  }

  async security(orgId: string): Promise<OrganizationSecurity> {
    const row = await this.db<SecurityRow>('organization_security').where({ org_id: orgId }).first();
    return row
      ? { orgId, requireSecondFactor: row.require_second_factor, updatedAt: new Date(row.updated_at), updatedBy: row.updated_by }
      : { orgId, requireSecondFactor: false, updatedAt: null, updatedBy: null };
  }

  async setRequireSecondFactor(orgId: string, required: boolean, byUserId: string, now: Date): Promise<OrganizationSecurity | 'no_passkey'> {
    const by = `user:${byUserId}`;
    return this.db.transaction(async (trx) => {
      if (required) {
        const own = await trx<PasskeyRow>('passkeys').where({ user_id: byUserId }).forShare().select('id');
        if (own.length === 0) return 'no_passkey' as const;
      }
      await trx<SecurityRow>('organization_security')
        .insert({ org_id: orgId, require_second_factor: required, updated_at: now, updated_by: by })
        .onConflict('org_id')
        .merge();
      return { orgId, requireSecondFactor: required, updatedAt: now, updatedBy: by };
    });
  }

  anyMembershipRequiresSecondFactor(userId: string): Promise<boolean> {
    return requiresSecondFactor(this.db, userId);
  }

  async membersWithoutPasskey(orgId: string): Promise<Array<{ userId: string; email: string; role: string }>> {
    const rows = await this.db('memberships as m')
      .join('users as u', 'u.id', 'm.user_id')
      .where('m.org_id', orgId)
      .whereNotExists((q) => q.select(this.db.raw('1')).from('passkeys as p').whereRaw('p.user_id = m.user_id'))
      .orderBy([{ column: 'm.created_at' }, { column: 'm.user_id' }])
      .select<Array<{ user_id: string; email: string; role: string }>>('m.user_id', 'u.email', 'm.role');
    return rows.map((r) => ({ userId: r.user_id, email: r.email, role: r.role }));
  }
}
