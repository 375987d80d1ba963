/**
 * Webhook endpoints in PostgreSQL: the merchant's registrations, soft-deleted (deliveries keep
 * pointing at them), at most `cap` live ones per organization.
 */
import type { Db } from '../db/knex.js';
import { dropPendingDeliveries } from './deliveries.repository.js';
import type { WebhookEndpoint, WebhookEndpointPatch, WebhookEventType } from './webhook.model.js';

interface EndpointRow {
  id: string;
  org_id: string;
  name: string;
  url: string;
  events: string[];
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const dateOrNull = (d: Date | string | null): Date | null => (d === null ? null : new Date(d));

const toEndpoint = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  url: row.url,
  events: row.events as WebhookEventType[],
  enabled: row.enabled,
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
  deletedAt: dateOrNull(row.deleted_at),
});

export interface WebhookEndpointRepository {
  /** Inserts unless the organization already has `cap` live endpoints; serialized per organization. */
  insertEndpointWithinCap(endpoint: WebhookEndpoint, cap: number): Promise<boolean>;
  findEndpoint(orgId: string, id: string): Promise<WebhookEndpoint | undefined>;
  /** Any organization's live endpoint (admin tools). */
  findEndpointById(id: string): Promise<WebhookEndpoint | undefined>;
  listEndpoints(orgId: string, page: { offset: number; limit: number }): Promise<{ records: WebhookEndpoint[]; total: number }>;
  updateEndpoint(orgId: string, id: string, patch: WebhookEndpointPatch, now: Date): Promise<WebhookEndpoint | undefined>;
  /** Soft-deletes the endpoint and drops its queued deliveries. */
  deleteEndpoint(orgId: string, id: string, now: Date): Promise<WebhookEndpoint | undefined>;
}

export class KnexWebhookEndpointRepository implements WebhookEndpointRepository {
  constructor(private readonly db: Db) {}

  async insertEndpointWithinCap(endpoint: WebhookEndpoint, cap: number): Promise<boolean> {
    return this.db.transaction(async (trx) => {
      // Row lock on the organization: two concurrent creations cannot both see 19.
      await trx('organizations').where({ id: endpoint.orgId }).forUpdate().first('id');
      const row = await trx('webhook_endpoints').where({ org_id: endpoint.orgId }).whereNull('deleted_at').count<{ count: number }[]>({ count: '*' }).first();
      if (Number(row?.count ?? 0) >= cap) return false;
      await trx<EndpointRow>('webhook_endpoints').insert({
        id: endpoint.id,
        org_id: endpoint.orgId,
        name: endpoint.name,
        url: endpoint.url,
        events: endpoint.events,
        enabled: endpoint.enabled,
        created_at: endpoint.createdAt,
        updated_at: endpoint.updatedAt,
        deleted_at: null,
      });
      return true;
    });
  }

  async findEndpoint(orgId: string, id: string): Promise<WebhookEndpoint | undefined> {
    const row = await this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId, id }).whereNull('deleted_at').first();
    return row ? toEndpoint(row) : undefined;
  }

  async findEndpointById(id: string): Promise<WebhookEndpoint | undefined> {
    const row = await this.db<EndpointRow>('webhook_endpoints').where({ id }).whereNull('deleted_at').first();
    return row ? toEndpoint(row) : undefined;
  }

  async listEndpoints(orgId: string, page: { offset: number; limit: number }) {
    const live = () => this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId }).whereNull('deleted_at');
    const rows = await live()
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .offset(page.offset)
      .limit(page.limit);
    const count = await live().count<{ count: number }[]>({ count: '*' }).first();
    return { records: rows.map(toEndpoint), total: Number(count?.count ?? 0) };
  }

  async updateEndpoint(orgId: string, id: string, patch: WebhookEndpointPatch, now: Date): Promise<WebhookEndpoint | undefined> {
    const changes: Partial<EndpointRow> = { updated_at: now };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.url !== undefined) changes.url = patch.url;
    if (patch.events !== undefined) changes.events = patch.events;
    if (patch.enabled !== undefined) changes.enabled = patch.enabled;
    const [row] = await this.db<EndpointRow>('webhook_endpoints').where({ org_id: orgId, id }).whereNull('deleted_at').update(changes).returning('*');
    return row ? toEndpoint(row as EndpointRow) : undefined;
  }

  async deleteEndpoint(orgId: string, id: string, now: Date): Promise<WebhookEndpoint | undefined> {
    return this.db.transaction(async (trx) => {
      const [row] = await trx<EndpointRow>('webhook_endpoints')
        .where({ org_id: orgId, id })
        .whereNull('deleted_at')
        .update({ deleted_at: now, updated_at: now })
        .returning('*');
      if (!row) return undefined;
      await dropPendingDeliveries(trx, id, 'dropped: endpoint deleted', now);
      return toEndpoint(row as EndpointRow);
    });
  }
}
