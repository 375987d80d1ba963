/** Customer portal sessions (migration 0140): only token hashes are stored. */
import type { Knex } from 'knex';

export type PortalOrigin = 'api' | 'checkout' | 'email';

export interface PortalSession {
  id: string;
  orgId: string;
  customerId: string;
  origin: PortalOrigin;
  returnUrl: string | null;
  allowCancelNow: boolean;
  /** Opened from a checkout page for a customer the merchant did not name: that order (and its subscription) only. */
  scopeOrderId: string | null;
  /** Whether the portal may cancel or keep subscriptions: a merchant-created session only when its creator holds `subscriptions:manage`. */
  canChangeSubscriptions: boolean;
  /** Who opened it for the buyer, for the audit log: `key:KEY_…`, `user:USR_…`; null when the buyer did (paid page, e-mailed link). */
  createdBy: string | null;
  /** The prices the buyer may move their subscriptions to (issue 39); null: no plan change offered. */
  planChangePriceIds?: string[] | null;
  /** Whether the buyer may change their seats. */
  allowQuantityChange?: boolean;
  linkExpiresAt: Date;
  enteredAt: Date | null;
  sessionExpiresAt: Date | null;
  createdAt: Date;
}

interface PortalSessionRow {
  id: string;
  org_id: string;
  customer_id: string;
  origin: PortalOrigin;
  return_url: string | null;
  allow_cancel_now: boolean;
  scope_order_id: string | null;
  can_change_subscriptions: boolean;
  created_by: string | null;
  plan_change_price_ids?: string[] | string | null;
  allow_quantity_change?: boolean;
  link_token_hash: string;
  link_expires_at: Date;
  entered_at: Date | null;
  session_token_hash: string | null;
  session_expires_at: Date | null;
  created_at: Date;
}

const toSession = (r: PortalSessionRow): PortalSession => ({
  id: r.id,
  orgId: r.org_id,
  customerId: r.customer_id,
  origin: r.origin,
  returnUrl: r.return_url,
  allowCancelNow: r.allow_cancel_now,
  scopeOrderId: r.scope_order_id,
  canChangeSubscriptions: r.can_change_subscriptions,
  createdBy: r.created_by,
  planChangePriceIds: typeof r.plan_change_price_ids === 'string' ? (JSON.parse(r.plan_change_price_ids) as string[]) : (r.plan_change_price_ids ?? null),
  allowQuantityChange: r.allow_quantity_change ?? false,
  linkExpiresAt: new Date(r.link_expires_at),
  enteredAt: r.entered_at ? new Date(r.entered_at) : null,
  sessionExpiresAt: r.session_expires_at ? new Date(r.session_expires_at) : null,
  createdAt: new Date(r.created_at),
});

export interface PortalSessionRepository {
  insert(session: PortalSession, linkTokenHash: string): Promise<void>;
  /** The session whose entry link this is, unused and unexpired at `now`. */
  findEnterable(linkTokenHash: string, now: Date): Promise<PortalSession | undefined>;
  /**
   * Uses the entry link once: records the session token's hash and expiry only while the link is
   * still unused and unexpired (a conditional write), so two concurrent uses open one session.
   */
  enter(linkTokenHash: string, sessionTokenHash: string, sessionExpiresAt: Date, now: Date): Promise<PortalSession | undefined>;
  findBySessionToken(sessionTokenHash: string, now: Date): Promise<PortalSession | undefined>;
  /** Ends a session (sign out): its cookie opens nothing any more. */
  end(sessionTokenHash: string, now: Date): Promise<void>;
  /** Deletes sessions whose link and session both expired before `before`. */
  deleteExpired(before: Date, limit: number): Promise<number>;
  /** How many links of this origin were made for the customer since `since` (the sign-in e-mails' bound). */
  countLinksSince(orgId: string, customerId: string, origin: PortalOrigin, since: Date): Promise<number>;
}

export class KnexPortalSessionRepository implements PortalSessionRepository {
  constructor(private readonly db: Knex) {}

  async insert(s: PortalSession, linkTokenHash: string): Promise<void> {
    await this.db('customer_portal_sessions').insert({
      id: s.id,
      org_id: s.orgId,
      customer_id: s.customerId,
      origin: s.origin,
      return_url: s.returnUrl,
      allow_cancel_now: s.allowCancelNow,
      scope_order_id: s.scopeOrderId,
      can_change_subscriptions: s.canChangeSubscriptions,
      created_by: s.createdBy,
      plan_change_price_ids: s.planChangePriceIds ? JSON.stringify(s.planChangePriceIds) : null,
      allow_quantity_change: s.allowQuantityChange ?? false,
      link_token_hash: linkTokenHash,
      link_expires_at: s.linkExpiresAt,
      created_at: s.createdAt,
    });
  }

  async findEnterable(linkTokenHash: string, now: Date): Promise<PortalSession | undefined> {
    const row = await this.db<PortalSessionRow>('customer_portal_sessions')
      .where({ link_token_hash: linkTokenHash })
      .whereNull('entered_at')
      .andWhere('link_expires_at', '>', now)
      .first();
    return row ? toSession(row) : undefined;
  }

  async enter(linkTokenHash: string, sessionTokenHash: string, sessionExpiresAt: Date, now: Date): Promise<PortalSession | undefined> {
    const rows = await this.db<PortalSessionRow>('customer_portal_sessions')
      .where({ link_token_hash: linkTokenHash })
      .whereNull('entered_at')
      .andWhere('link_expires_at', '>', now)
      .update({ entered_at: now, session_token_hash: sessionTokenHash, session_expires_at: sessionExpiresAt })
      .returning('*');
    const row = (rows as PortalSessionRow[])[0];
    return row ? toSession(row) : undefined;
  }

  async findBySessionToken(sessionTokenHash: string, now: Date): Promise<PortalSession | undefined> {
    const row = await this.db<PortalSessionRow>('customer_portal_sessions')
      .where({ session_token_hash: sessionTokenHash })
      .andWhere('session_expires_at', '>', now)
      .first();
    return row ? toSession(row) : undefined;
  }

  async end(sessionTokenHash: string, now: Date): Promise<void> {
    await this.db('customer_portal_sessions').where({ session_token_hash: sessionTokenHash }).update({ session_expires_at: now });
  }

  async countLinksSince(orgId: string, customerId: string, origin: PortalOrigin, since: Date): Promise<number> {
    const row = await this.db('customer_portal_sessions').where({ org_id: orgId, customer_id: customerId, origin }).andWhere('created_at', '>=', since).count<{ count: string | number }[]>({ count: '*' }).first();
    return Number(row?.count ?? 0);
  }

  async deleteExpired(before: Date, limit: number): Promise<number> {
    const ids = this.db('customer_portal_sessions')
      .where('link_expires_at', '<', before)
      .andWhere((q) => q.whereNull('session_expires_at').orWhere('session_expires_at', '<', before))
      .select('id')
      .limit(limit);
    return this.db('customer_portal_sessions').whereIn('id', ids).delete();
  }
}
