/** Organizations and merchant API keys in PostgreSQL. The only module of this domain that speaks knex. */
import { runStatement, type Db } from '../db/knex.js';

export interface Organization {
  id: string;
  name: string;
  /** What buyers see on hosted pages; null shows `name`. */
  displayName: string | null;
  frozen: boolean;
  cardVerified: boolean;
  cardAccountEnabled: boolean;
  /** The Stripe connected account (`acct_…`) its card payments are transferred to (destination charges); null: the platform keeps them. */
  stripeAccountId: string | null;
  stripeAccountBoundAt: Date | null;
  /** What Stripe last said of that account (Connect `account.updated`); null until it says anything after the binding. */
  stripeAccountState: StripeAccountState | null;
  /** Branding of its hosted pages and buyer e-mails; null fields: Kassa's defaults. */
  branding: Branding;
  /** IANA name of the zone the console shows its figures in ('UTC' unless changed). */
  timeZone: string;
  createdAt: Date;
  updatedAt: Date;
}

/** An https URL of the logo, and an accent colour `#rrggbb` (lower case). */
export interface Branding {
  logoUrl: string | null;
  accentColor: string | null;
}

/** A connected account's state as Stripe reported it (the processors domain reads it back from Stripe). */
export interface StripeAccountState {
  chargesEnabled: boolean;
  /** Capability statuses (`active`, `inactive`, `pending`); null when the account has none. */
  transfers: string | null;
  cardPayments: string | null;
  checkedAt: Date;
}

export interface ApiKey {
  id: string;
  orgId: string;
  name: string;
  prefix: string;
  permissions: string[];
  createdAt: Date;
  revokedAt: Date | null;
  /** Who made it: `user:USR_…` (a member, in the console), `operator` or null (the admin API, before accounts existed). */
  createdBy?: string | null;
  /** Its last use, a minute coarse; null: never used. */
  lastUsedAt?: Date | null;
}

export interface ApiKeyWithHash extends ApiKey {
  keyHash: string;
}

/** A key as authentication reads it: with its organization, so a request needs one lookup for both. */
export interface ApiKeyWithOrganization extends ApiKeyWithHash {
  organization: Organization;
  /** For a member's key (`createdBy` `user:…`): the member's current role in the key's organization; null once they are no longer a member. */
  creatorRole: string | null;
}

export type OrganizationPatch = Partial<Pick<Organization, 'name' | 'displayName' | 'frozen' | 'cardVerified' | 'cardAccountEnabled' | 'timeZone'>> & { branding?: Partial<Branding> };

export interface OrgRepository {
  insertOrganization(org: Organization): Promise<void>;
  findOrganization(id: string): Promise<Organization | undefined>;
  listOrganizations(page: { offset: number; limit: number }): Promise<{ records: Organization[]; total: number }>;
  updateOrganization(id: string, patch: OrganizationPatch, now: Date): Promise<Organization | undefined>;
  countOrganizations(): Promise<number>;
  /**
   * Binds (or, with null, unbinds) the organization's Stripe connected account: undefined for an
   * unknown organization, 'taken' when another organization is bound to that account.
   */
  setStripeAccount(id: string, accountId: string | null, now: Date): Promise<Organization | 'taken' | undefined>;
  /** Stores Stripe's report on the organization bound to `accountId`; undefined when none is. */
  setStripeAccountState(accountId: string, state: StripeAccountState): Promise<Organization | undefined>;
  insertApiKey(key: ApiKeyWithHash): Promise<void>;
  findApiKeyByHash(keyHash: string): Promise<ApiKeyWithOrganization | undefined>;
  listApiKeys(orgId: string): Promise<ApiKey[]>;
  /** Revokes the organization's live keys made by `createdBy` (`user:…`); the keys revoked. */
  revokeApiKeysCreatedBy(orgId: string, createdBy: string, now: Date): Promise<ApiKey[]>;
  revokeApiKey(id: string, now: Date, orgId?: string): Promise<ApiKey | undefined>;
  touchApiKey(id: string, now: Date): Promise<void>;
}

interface OrganizationRow {
  id: string;
  name: string;
  display_name: string | null;
  frozen: boolean;
  card_verified: boolean;
  card_account_enabled: boolean;
  stripe_account_id: string | null;
  stripe_account_bound_at: Date | string | null;
  stripe_account_charges_enabled?: boolean | null;
  stripe_account_transfers?: string | null;
  stripe_account_card_payments?: string | null;
  stripe_account_checked_at?: Date | string | null;
  brand_logo_url?: string | null;
  brand_accent_color?: string | null;
  time_zone?: string;
  created_at: Date;
  updated_at: Date;
}

interface ApiKeyRow {
  id: string;
  org_id: string;
  name: string;
  key_hash: string;
  prefix: string;
  permissions: string[];
  created_at: Date;
  revoked_at: Date | null;
  created_by?: string | null;
  last_used_at?: Date | null;
}

/** Run directly and prepared (runStatement): its columns are listed, so a column added by a migration cannot change its result type. */
/**
 * A member's key is read with the member's current role (memberships, the accounts domain's
 * table): the key never exceeds it, and dies with the membership (issue 37, item 7).
 */
const API_KEY_BY_HASH_SQL = `SELECT k.id, k.org_id, k.name, k.key_hash, k.prefix, k.permissions, k.created_at, k.revoked_at, k.created_by, m.role AS creator_role, row_to_json(o.*) AS org
    FROM api_keys k JOIN organizations o ON o.id = k.org_id
    LEFT JOIN memberships m ON k.created_by LIKE 'user:%' AND m.org_id = k.org_id AND m.user_id = substr(k.created_by, 6)
   WHERE k.key_hash = $1
   LIMIT 1`;

const toOrganization = (row: OrganizationRow): Organization => ({
  id: row.id,
  name: row.name,
  displayName: row.display_name ?? null,
  frozen: row.frozen,
  cardVerified: row.card_verified,
  cardAccountEnabled: row.card_account_enabled,
  // Absent in rows read while the 0078 migration had not run yet (a rolling start).
  stripeAccountId: row.stripe_account_id ?? null,
  stripeAccountBoundAt: row.stripe_account_bound_at ? new Date(row.stripe_account_bound_at) : null,
  // Absent before the 0132 migration; null until Stripe reports on the bound account.
  stripeAccountState: row.stripe_account_checked_at
    ? {
        chargesEnabled: row.stripe_account_charges_enabled ?? false,
        transfers: row.stripe_account_transfers ?? null,
        cardPayments: row.stripe_account_card_payments ?? null,
        checkedAt: new Date(row.stripe_account_checked_at),
      }
    : null,
  // Absent before the 0176 migration.
  branding: { logoUrl: row.brand_logo_url ?? null, accentColor: row.brand_accent_color ?? null },
  // Absent before the 0201 migration.
  timeZone: row.time_zone ?? 'UTC',
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
});

const toApiKey = (row: ApiKeyRow): ApiKeyWithHash => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  keyHash: row.key_hash,
  prefix: row.prefix,
  permissions: row.permissions,
  createdAt: new Date(row.created_at),
  revokedAt: row.revoked_at ? new Date(row.revoked_at) : null,
  createdBy: row.created_by ?? null,
  lastUsedAt: row.last_used_at ? new Date(row.last_used_at) : null,
});

const withoutHash = ({ keyHash: _hash, ...key }: ApiKeyWithHash): ApiKey => key;

export class KnexOrgRepository implements OrgRepository {
  constructor(private readonly db: Db) {}

  async insertOrganization(org: Organization): Promise<void> {
    await this.db<OrganizationRow>('organizations').insert({
      id: org.id,
      name: org.name,
      display_name: org.displayName,
      frozen: org.frozen,
      card_verified: org.cardVerified,
      card_account_enabled: org.cardAccountEnabled,
      stripe_account_id: org.stripeAccountId,
      stripe_account_bound_at: org.stripeAccountBoundAt,
      time_zone: org.timeZone,
      created_at: org.createdAt,
      updated_at: org.updatedAt,
    });
  }

  async findOrganization(id: string): Promise<Organization | undefined> {
    const row = await this.db<OrganizationRow>('organizations').where({ id }).first();
    return row ? toOrganization(row) : undefined;
  }

  async listOrganizations(page: { offset: number; limit: number }) {
    const rows = await this.db<OrganizationRow>('organizations')
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .offset(page.offset)
      .limit(page.limit);
    return { records: rows.map(toOrganization), total: await this.countOrganizations() };
  }

  async updateOrganization(id: string, patch: OrganizationPatch, now: Date): Promise<Organization | undefined> {
    const changes: Partial<OrganizationRow> = { updated_at: now };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.displayName !== undefined) changes.display_name = patch.displayName;
    if (patch.frozen !== undefined) changes.frozen = patch.frozen;
    if (patch.cardVerified !== undefined) changes.card_verified = patch.cardVerified;
    if (patch.cardAccountEnabled !== undefined) changes.card_account_enabled = patch.cardAccountEnabled;
    if (patch.branding?.logoUrl !== undefined) changes.brand_logo_url = patch.branding.logoUrl;
    if (patch.branding?.accentColor !== undefined) changes.brand_accent_color = patch.branding.accentColor;
    if (patch.timeZone !== undefined) changes.time_zone = patch.timeZone;
    const [row] = await this.db<OrganizationRow>('organizations').where({ id }).update(changes).returning('*');
    return row ? toOrganization(row as OrganizationRow) : undefined;
  }

  async countOrganizations(): Promise<number> {
    const row = await this.db('organizations').count<{ count: number }[]>({ count: '*' }).first();
    return Number(row?.count ?? 0);
  }

  async setStripeAccount(id: string, accountId: string | null, now: Date): Promise<Organization | 'taken' | undefined> {
    try {
      const [row] = await this.db<OrganizationRow>('organizations')
        .where({ id })
        // A new binding starts with no report of Stripe's: the old account's state is not the new one's.
        .update({
          stripe_account_id: accountId,
          stripe_account_bound_at: accountId ? now : null,
          stripe_account_charges_enabled: null,
          stripe_account_transfers: null,
          stripe_account_card_payments: null,
          stripe_account_checked_at: null,
          updated_at: now,
        })
        .returning('*');
      return row ? toOrganization(row as OrganizationRow) : undefined;
    } catch (err) {
      if ((err as { code?: string }).code === '23505') return 'taken';
      throw err;
    }
  }

  async setStripeAccountState(accountId: string, state: StripeAccountState): Promise<Organization | undefined> {
    const [row] = await this.db<OrganizationRow>('organizations')
      .where({ stripe_account_id: accountId })
      .update({
        stripe_account_charges_enabled: state.chargesEnabled,
        stripe_account_transfers: state.transfers,
        stripe_account_card_payments: state.cardPayments,
        stripe_account_checked_at: state.checkedAt,
      })
      .returning('*');
    return row ? toOrganization(row as OrganizationRow) : undefined;
  }

  async insertApiKey(key: ApiKeyWithHash): Promise<void> {
    await this.db<ApiKeyRow>('api_keys').insert({
      id: key.id,
      org_id: key.orgId,
      name: key.name,
      key_hash: key.keyHash,
      prefix: key.prefix,
      permissions: key.permissions,
      created_at: key.createdAt,
      revoked_at: key.revokedAt,
      created_by: key.createdBy ?? null,
    });
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyWithOrganization | undefined> {
    // Every authenticated merchant request runs this: the organization's flags come in the same
    // round trip, so the checkout rules need no second read.
    const [row] = await runStatement<ApiKeyRow & { org: OrganizationRow; creator_role: string | null }>(this.db, API_KEY_BY_HASH_SQL, [keyHash]);
    return row ? { ...toApiKey(row), organization: toOrganization(row.org), creatorRole: row.creator_role ?? null } : undefined;
  }

  async listApiKeys(orgId: string): Promise<ApiKey[]> {
    const rows = await this.db<ApiKeyRow>('api_keys').where({ org_id: orgId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]);
    return rows.map((row) => withoutHash(toApiKey(row)));
  }

  async revokeApiKeysCreatedBy(orgId: string, createdBy: string, now: Date): Promise<ApiKey[]> {
    const rows = await this.db<ApiKeyRow>('api_keys').where({ org_id: orgId, created_by: createdBy }).whereNull('revoked_at').update({ revoked_at: now }).returning('*');
    return (rows as ApiKeyRow[]).map((row) => withoutHash(toApiKey(row)));
  }

  async revokeApiKey(id: string, now: Date, orgId?: string): Promise<ApiKey | undefined> {
    const scope = orgId ? { id, org_id: orgId } : { id };
    await this.db<ApiKeyRow>('api_keys').where(scope).whereNull('revoked_at').update({ revoked_at: now });
    const row = await this.db<ApiKeyRow>('api_keys').where(scope).first();
    return row ? withoutHash(toApiKey(row)) : undefined;
  }

  async touchApiKey(id: string, now: Date): Promise<void> {
    await this.db<ApiKeyRow>('api_keys').where({ id }).where((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', now)).update({ last_used_at: now });
  }
}
