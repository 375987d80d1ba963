import type { Knex } from 'knex';
import type { Customer } from '../commerce/model.js';
import type { CustomerRepository } from '../commerce/stores.js';
import { readListPage } from '../db/list-page.js';
import type { Keyset, ListPage, ListWindow } from '../kernel/list.js';


interface CustomerRow {
  id: string;
  org_id: string;
  email: string;
  external_id: string | null;
  created_at: Date;
}

const toCustomer = (row: CustomerRow): Customer => ({ id: row.id, orgId: row.org_id, email: row.email, externalId: row.external_id ?? null, createdAt: new Date(row.created_at) });

const UNIQUE_VIOLATION = '23505';
const isUniqueViolation = (error: unknown) => (error as { code?: string } | null)?.code === UNIQUE_VIOLATION;


export class KnexCustomerRepository implements CustomerRepository {
  constructor(private readonly db: Knex) {}

  async findOrCreateByEmail(candidate: Customer): Promise<Customer> {
    // DO UPDATE (a no-op write) rather than DO NOTHING so RETURNING yields the existing row too.
    const result = await this.db.raw(
      `INSERT INTO customers (id, org_id, email, created_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (org_id, lower(email)) DO UPDATE SET email = customers.email
       RETURNING *`,
      [candidate.id, candidate.orgId, candidate.email, candidate.createdAt],
    );
    return toCustomer(result.rows[0] as CustomerRow);
  }

  async find(orgId: string, id: string): Promise<Customer | undefined> {
    const row = await this.db<CustomerRow>('customers').where({ org_id: orgId, id }).first();
    return row ? toCustomer(row) : undefined;
  }

  async findByEmail(orgId: string, email: string): Promise<Customer | undefined> {
    const row = await this.db<CustomerRow>('customers').where({ org_id: orgId }).andWhereRaw('lower(email) = lower(?)', [email]).first();
    return row ? toCustomer(row) : undefined;
  }

  async findByExternalId(orgId: string, externalId: string): Promise<Customer | undefined> {
    const row = await this.db<CustomerRow>('customers').where({ org_id: orgId, external_id: externalId }).first();
    return row ? toCustomer(row) : undefined;
  }

  async findByRefs(orgId: string, refs: { ids: string[]; externalIds: string[] }): Promise<Customer[]> {
    if (refs.ids.length === 0 && refs.externalIds.length === 0) return [];
    return (await this.byRefs(orgId, refs)).map(toCustomer);
  }

  async idsByRefs(orgId: string, refs: { ids: string[]; externalIds: string[] }): Promise<Array<{ id: string; externalId: string | null }>> {
    if (refs.ids.length === 0 && refs.externalIds.length === 0) return [];
    const rows = (await this.byRefs(orgId, refs).select('id', 'external_id')) as Array<{ id: string; external_id: string | null }>;
    return rows.map((r) => ({ id: r.id, externalId: r.external_id ?? null }));
  }

  /** The organization's customers named by these ids or external ids. */
  private byRefs(orgId: string, refs: { ids: string[]; externalIds: string[] }) {
    return this.db<CustomerRow>('customers')
      .where('org_id', orgId)
      // One array parameter per list (not one per customer): an ingest batch names up to 1,000.
      .andWhere((q) => {
        if (refs.ids.length > 0) q.orWhereRaw('id = ANY(?::text[])', [refs.ids]);
        if (refs.externalIds.length > 0) q.orWhereRaw('external_id = ANY(?::text[])', [refs.externalIds]);
      });
  }

  async setExternalId(orgId: string, id: string, externalId: string | null): Promise<boolean> {
    try {
      // A savepoint: the unique violation of a taken id must not abort a surrounding transaction.
      await this.db.transaction((trx) => trx('customers').where({ org_id: orgId, id }).update({ external_id: externalId }));
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false;
      throw error;
    }
  }

  async attachExternalId(orgId: string, id: string, externalId: string): Promise<Customer | undefined> {
    try {
      await this.db.transaction((trx) => trx('customers').where({ org_id: orgId, id }).whereNull('external_id').update({ external_id: externalId }));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    return this.find(orgId, id);
  }

  private customersOf(orgId: string, email?: string, externalId?: string) {
    const query = this.db<CustomerRow>('customers as c').where('c.org_id', orgId);
    if (email) query.whereRaw('lower(c.email) = lower(?)', [email]);
    if (externalId !== undefined) query.andWhere('c.external_id', externalId);
    return query;
  }

  private withOrders(orgId: string, email?: string, externalId?: string) {
    return this.customersOf(orgId, email, externalId).whereExists((sub) => sub.select(this.db.raw('1')).from('orders as o').whereRaw('o.customer_id = c.id').andWhere('o.org_id', orgId));
  }

  async keyset(orgId: string, id: string): Promise<Keyset | undefined> {
    const row = await this.db<CustomerRow>('customers').where({ org_id: orgId, id }).first('created_at', 'id');
    return row ? { createdAt: new Date(row.created_at), id: row.id } : undefined;
  }

  async listWithOrders(orgId: string, filter: { email?: string; externalId?: string }, window: ListWindow): Promise<ListPage<Customer>> {
    const page = await readListPage<CustomerRow & Record<string, unknown>>(
      this.db,
      {
        filtered: () => this.withOrders(orgId, filter.email, filter.externalId),
        // Beyond the exact bound: the organization's customers. A customer is created with their
        // first order, so nearly all have one; the planner's guess for the semi-join was far off.
        estimated: () => this.customersOf(orgId, filter.email, filter.externalId),
        createdAt: 'c.created_at',
        id: 'c.id',
        select: 'c.*',
      },
      window,
    );
    return { ...page, records: page.records.map(toCustomer) };
  }


  async findWithOrders(orgId: string, id: string): Promise<Customer | undefined> {
    const row = await this.withOrders(orgId).andWhere('c.id', id).select('c.*').first();
    return row ? toCustomer(row as CustomerRow) : undefined;
  }
}
