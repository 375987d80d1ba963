/** Organizations and merchant API keys: creation, flags, key issuance and key authentication. */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { sha256Hex } from '../kernel/secrets.js';
import { canonicalTimeZone } from '../kernel/time-zone.js';
import { AppError, conflict, forbidden, notFound, unauthorized, validationError } from '../kernel/errors.js';
import { assertOneLineName, shownName } from '../kernel/names.js';
import type { ApiKey, Organization, OrganizationPatch, OrgRepository, StripeAccountState } from './orgs.repository.js';
import { ALL_PERMISSIONS, type Permission } from './permissions.js';
import { ApiKeyCache } from './api-key-cache.js';

/** Who a request acts as: an API key, or a member signed in to the console (their session). */
export type Actor = { type: 'api_key'; id: string } | { type: 'user'; id: string; sessionId?: string };

export interface MerchantAuth {
  orgId: string;
  /** The API key's id; for a console session (src/accounts), the session's id (rate limits count per session). */
  apiKeyId: string;
  actor: Actor;
  permissions: string[];
  /** The organization as it was when the request was authenticated (read with the key). */
  organization: Organization;
}

const API_KEY_PATTERN = /^ak_[A-Za-z0-9_-]{43}$/;

/** A Stripe account id as the admin API accepts it (openapi/admin.yaml, StripeAccountBind). */
export const STRIPE_ACCOUNT_ID_PATTERN = /^acct_[A-Za-z0-9]{8,250}$/;

/**
 * Asks the card processor about a connected account before it is bound (Stripe: the account is
 * connected to the platform and can receive transfers). Absent when Stripe is not the card processor.
 */
export interface ConnectedAccountCheck {
  /** VALIDATION_ERROR for an account that cannot be paid; SERVICE_UNAVAILABLE when the processor cannot be reached. */
  verify(accountId: string): Promise<void>;
}

/** The API-key permissions a member's role allows now (src/accounts/roles.ts keyPermissionsOf); undefined for no role. */
export type MemberKeyLimit = (role: string) => readonly string[] | undefined;

export class OrgService {
  private readonly keys: ApiKeyCache;
  private memberKeyLimit: MemberKeyLimit = () => undefined;

  constructor(
    private readonly repo: OrgRepository,
    private readonly clock: Clock,
    private readonly connectedAccounts?: ConnectedAccountCheck,
  ) {
    this.keys = new ApiKeyCache(clock);
  }

  async createOrganization(input: { name: string; displayName?: string }): Promise<Organization> {
    assertOneLineName('name', input.name);
    assertOneLineName('displayName', input.displayName);
    const now = this.clock.now();
    const org: Organization = {
      id: newId('ORG'),
      name: input.name.trim(),
      displayName: input.displayName?.trim() ?? null,
      frozen: false,
      cardVerified: true,
      cardAccountEnabled: true,
      stripeAccountId: null,
      stripeAccountBoundAt: null,
      stripeAccountState: null,
      branding: { logoUrl: null, accentColor: null },
      timeZone: 'UTC',
      createdAt: now,
      updatedAt: now,
    };
    await this.repo.insertOrganization(org);
    return org;
  }

  async getOrganization(id: string): Promise<Organization> {
    const org = await this.repo.findOrganization(id);
    if (!org) throw notFound('Organization');
    return org;
  }

  listOrganizations(page: number, size: number) {
    return this.repo.listOrganizations({ offset: (page - 1) * size, limit: size });
  }

  async updateOrganization(id: string, patch: OrganizationPatch): Promise<Organization> {
    assertOneLineName('name', patch.name);
    assertOneLineName('displayName', patch.displayName);
    const updated = await this.repo.updateOrganization(
      id,
      {
        ...patch,
        ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
        ...(typeof patch.displayName === 'string' ? { displayName: patch.displayName.trim() } : {}),
      },
      this.clock.now(),
    );
    if (!updated) throw notFound('Organization');
    // Authentication hands the organization's flags to the request: the next one sees these.
    this.keys.clear();
    return updated;
  }

  /**
   * The settings a member changes from the console: the display name buyers see (null: `name`)
   * and the branding of the hosted pages and buyer e-mails. The logo is an https URL (at most
   * 2048 characters, no user or password in it): buyers' browsers and mail clients load it from
   * there; the accent colour is `#rrggbb`, stored in lower case (pages pick the text colour on it
   * by contrast). Null clears either. The time zone is an IANA name known to Intl, stored in its
   * canonical spelling (`europe/paris` → `Europe/Paris`).
   */
  async updateSettings(orgId: string, input: { displayName?: string | null; branding?: { logoUrl?: string | null; accentColor?: string | null }; timeZone?: string }): Promise<Organization> {
    const timeZone = input.timeZone === undefined ? undefined : canonicalTimeZone(input.timeZone);
    if (input.timeZone !== undefined && timeZone === undefined) throw validationError(`timeZone must be an IANA time zone name such as Europe/Paris or UTC ("${input.timeZone.slice(0, 64)}" is not one)`, { field: 'timeZone' });
    const branding: { logoUrl?: string | null; accentColor?: string | null } = {};
    if (input.branding?.logoUrl !== undefined) branding.logoUrl = input.branding.logoUrl === null ? null : checkedLogoUrl(input.branding.logoUrl);
    if (input.branding?.accentColor !== undefined) {
      const colour = input.branding.accentColor;
      if (colour !== null && !/^#[0-9a-fA-F]{6}$/.test(colour)) throw validationError('branding.accentColor must be a colour #rrggbb (six hexadecimal digits)', { field: 'branding.accentColor' });
      branding.accentColor = colour === null ? null : colour.toLowerCase();
    }
    return this.updateOrganization(orgId, {
      ...(input.displayName !== undefined ? { displayName: input.displayName } : {}),
      ...(input.branding !== undefined ? { branding } : {}),
      ...(timeZone !== undefined ? { timeZone } : {}),
    });
  }

  /**
   * Binds the organization's card payments to a Stripe connected account (destination charges).
   * Sessions already open keep the account they were opened for (it is recorded on each), so a
   * change never re-routes a payment in flight nor the refunds of an order already paid.
   */
  async bindStripeAccount(orgId: string, accountId: string): Promise<Organization> {
    if (!STRIPE_ACCOUNT_ID_PATTERN.test(accountId)) throw validationError('body.accountId must be a Stripe account id (acct_ followed by letters and digits)');
    await this.getOrganization(orgId);
    await this.connectedAccounts?.verify(accountId);
    return this.storeStripeAccount(orgId, accountId);
  }

  /** Unbinds it: new card sessions are paid to the platform's own Stripe account. */
  unbindStripeAccount(orgId: string): Promise<Organization> {
    return this.storeStripeAccount(orgId, null);
  }

  private async storeStripeAccount(orgId: string, accountId: string | null): Promise<Organization> {
    const stored = await this.repo.setStripeAccount(orgId, accountId, this.clock.now());
    if (stored === 'taken') throw conflict('This Stripe account is bound to another organization; unbind it there first');
    if (!stored) throw notFound('Organization');
    // New sessions read the binding from the organization authentication hands them.
    this.keys.clear();
    return stored;
  }

  /**
   * Records what Stripe now says of a connected account (Connect `account.updated`) on the
   * organization bound to it; false when none is. Authentication hands the organization to new
   * checkouts, so the cache is emptied: an account that cannot be paid refuses the next one.
   */
  async recordStripeAccountState(report: Omit<StripeAccountState, 'checkedAt'> & { accountId: string }): Promise<boolean> {
    const { accountId, ...state } = report;
    const org = await this.repo.setStripeAccountState(accountId, { ...state, checkedAt: this.clock.now() });
    this.keys.clear();
    return org !== undefined;
  }

  /**
   * Why the organization's connected account cannot take card payments, as Stripe last reported
   * it (charges disabled, `transfers` not active, a `card_payments` capability not active);
   * undefined when it can, when none is bound, or before Stripe reported on it.
   */
  static stripeAccountProblem(org: Pick<Organization, 'stripeAccountId' | 'stripeAccountState'>): string | undefined {
    const state = org.stripeAccountState;
    if (!org.stripeAccountId || !state) return undefined;
    const causes: string[] = [];
    if (!state.chargesEnabled) causes.push('charges_enabled is false');
    if (state.transfers !== 'active') causes.push(`its transfers capability is ${state.transfers ?? 'missing'}`);
    if (state.cardPayments !== null && state.cardPayments !== 'active') causes.push(`its card_payments capability is ${state.cardPayments}`);
    return causes.length === 0 ? undefined : `Stripe reports the connected account ${org.stripeAccountId} cannot take payments: ${causes.join(', ')}`;
  }

  /** The name a buyer sees on the organization's hosted pages; undefined for an unknown id. */
  async displayNameOf(orgId: string): Promise<string | undefined> {
    const org = await this.repo.findOrganization(orgId);
    return org ? OrgService.displayName(org) : undefined;
  }

  /** The display name with the branding, for the hosted pages, the portal and buyer e-mails. */
  async brandedOf(orgId: string): Promise<{ name: string; brand: { logoUrl: string | null; accentColor: string | null } } | undefined> {
    const org = await this.repo.findOrganization(orgId);
    return org ? { name: OrgService.displayName(org), brand: org.branding } : undefined;
  }

  static displayName(org: Organization): string {
    // A name stored before control characters were refused is shown on one line (issue 37 §27).
    return shownName(org.displayName ?? org.name);
  }

  countOrganizations(): Promise<number> {
    return this.repo.countOrganizations();
  }

  /** Issues `ak_` + base64url(32 random bytes). Only its SHA-256 is stored; the key is returned once. */
  async createApiKey(orgId: string, input: { name?: string; permissions?: Permission[]; createdBy?: string }): Promise<ApiKey & { key: string }> {
    await this.getOrganization(orgId);
    const key = `ak_${randomBytes(32).toString('base64url')}`;
    const apiKey: ApiKey = {
      id: newId('AKI'),
      orgId,
      name: input.name ?? 'default',
      prefix: key.slice(0, 10),
      permissions: [...(input.permissions ?? ALL_PERMISSIONS)],
      createdAt: this.clock.now(),
      revokedAt: null,
      createdBy: input.createdBy ?? null,
      lastUsedAt: null,
    };
    await this.repo.insertApiKey({ ...apiKey, keyHash: sha256Hex(key) });
    return { ...apiKey, key };
  }

  /**
   * The accounts module says what a member's role allows (it is created after this service and
   * owns the roles): a member's key is limited to it at every request.
   */
  limitMemberKeys(limit: MemberKeyLimit): void {
    this.memberKeyLimit = limit;
    this.keys.clear();
  }

  /** After a member's role changed in this process: their keys' next request reads the new role. */
  forgetCachedKeys(): void {
    this.keys.clear();
  }

  /** Revokes the organization's live keys a member made (`user:USR_…`): when they are removed. */
  async revokeApiKeysCreatedBy(orgId: string, createdBy: string): Promise<ApiKey[]> {
    const revoked = await this.repo.revokeApiKeysCreatedBy(orgId, createdBy, this.clock.now());
    this.keys.clear();
    return revoked;
  }

  async listApiKeys(orgId: string): Promise<ApiKey[]> {
    await this.getOrganization(orgId);
    return this.repo.listApiKeys(orgId);
  }

  /** Revokes a key; with orgId, only a key of that organization (another's is not found). */
  async revokeApiKey(id: string, orgId?: string): Promise<ApiKey> {
    const key = await this.repo.revokeApiKey(id, this.clock.now(), orgId);
    this.keys.clear();
    if (!key) throw notFound('API key');
    return key;
  }

  /**
   * Resolves `X-API-Key`. The lookup is by SHA-256 (an index hit reveals nothing about the key),
   * and the stored hash is compared in constant time. Keys are cached for a bounded time
   * (src/orgs/api-key-cache.ts: revocation takes effect within API_KEY_CACHE_TTL_MS everywhere).
   */
  async authenticateApiKey(presented: string | undefined, requiredPermission?: string): Promise<MerchantAuth> {
    if (!presented || !API_KEY_PATTERN.test(presented)) throw unauthorized();
    const hash = sha256Hex(presented);
    const key = await this.keys.get(hash, () => this.repo.findApiKeyByHash(hash));
    // Found by its hash (the cache's key, the repository's WHERE key_hash): comparing the hashes
    // again could only be true, and cost two more SHA-256 per request. The lookup's timing can
    // tell an attacker only about hashes of keys they chose, never a stored key (SHA-256 has no
    // known preimage attack), which is why the lookup by hash needs no constant-time compare.
    if (!key || key.revokedAt) throw unauthorized();
    let permissions = key.permissions;
    if (key.createdBy?.startsWith('user:')) {
      // A member's key: at most what the member's role allows now; nothing once they left.
      const allowed = key.creatorRole === null ? undefined : this.memberKeyLimit(key.creatorRole);
      if (!allowed) throw unauthorized();
      permissions = permissions.filter((p) => allowed.includes(p));
      if (requiredPermission && key.permissions.includes(requiredPermission) && !permissions.includes(requiredPermission)) {
        throw forbidden(`This API key lacks the permission "${requiredPermission}": the role of the member who made it no longer grants it`);
      }
    }
    if (requiredPermission && !permissions.includes(requiredPermission)) {
      throw forbidden(`This API key lacks the permission "${requiredPermission}"`);
    }
    this.noteUse(key.id);
    return { orgId: key.orgId, apiKeyId: key.id, actor: { type: 'api_key', id: key.id }, permissions, organization: key.organization };
  }

  /**
   * Records that a key was used, at most once a minute per key and process, after the answer's
   * work (not awaited): the console lists keys with their last use, a minute coarse.
   */
  private noteUse(keyId: string): void {
    const now = this.clock.now();
    const last = this.lastNoted.get(keyId);
    if (last !== undefined && now.getTime() - last < 60_000) return;
    if (this.lastNoted.size > 10_000) this.lastNoted.clear();
    this.lastNoted.set(keyId, now.getTime());
    this.repo.touchApiKey(keyId, now).catch(() => this.lastNoted.delete(keyId));
  }

  private readonly lastNoted = new Map<string, number>();

  /** Why an organization may not open a checkout on any rail (crypto checks only this). */
  static checkoutRefusal(org: Organization): AppError | undefined {
    if (org.frozen) return forbidden('The organization is frozen and cannot create checkout sessions');
    return undefined;
  }

  /** Why an organization may not open a card checkout, or undefined when it may. */
  static cardCheckoutRefusal(org: Organization): AppError | undefined {
    const refusal = OrgService.checkoutRefusal(org);
    if (refusal) return refusal;
    if (!org.cardVerified) return forbidden('Card/USD verification of the organization is incomplete');
    if (!org.cardAccountEnabled) return forbidden('The card payment account is missing or not enabled to receive payments');
    return undefined;
  }
}

/** A logo address buyers' browsers may load: https only, no credentials, at most 2048 characters. */
function checkedLogoUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw validationError('branding.logoUrl must be an absolute https URL', { field: 'branding.logoUrl' });
  }
  if (url.protocol !== 'https:') throw validationError('branding.logoUrl must be an https URL (pages served over https cannot show an http image)', { field: 'branding.logoUrl' });
  if (url.username || url.password) throw validationError('branding.logoUrl must not contain a user name or password', { field: 'branding.logoUrl' });
  if (url.href.length > 2048) throw validationError('branding.logoUrl must be at most 2048 characters', { field: 'branding.logoUrl' });
  return url.href;
}
