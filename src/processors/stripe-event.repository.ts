import type { Knex } from 'knex';

/** Where reconciliation stands: every event created before `createdThrough` (Unix s) was applied. */
export interface StripeEventCursor {
  createdThrough: number;
}

/** Stripe events already applied, by Stripe's event id, and the reconciliation cursor. */
export interface StripeEventRepository {
  isProcessed(id: string): Promise<boolean>;
  /** Remembers an applied event; a second mark of the same id (a concurrent redelivery) is a no-op. */
  markProcessed(id: string, type: string, at: Date): Promise<void>;
  /** Creates the cursor at `createdThrough` unless it exists. */
  ensureCursor(name: string, createdThrough: number, now: Date): Promise<void>;
  /** Takes the cursor's lease unless another owner holds a live one. */
  leaseCursor(name: string, owner: string, now: Date, until: Date): Promise<StripeEventCursor | undefined>;
  /** Moves the cursor forward (never back) while `owner` holds the lease; false when it lost it. */
  saveCursor(name: string, owner: string, createdThrough: number, until: Date, now: Date): Promise<boolean>;
  releaseCursor(name: string, owner: string): Promise<void>;
}

export class KnexStripeEventRepository implements StripeEventRepository {
  constructor(private readonly db: Knex) {}

  async isProcessed(id: string): Promise<boolean> {
    return (await this.db('stripe_events').where({ id }).first('id')) !== undefined;
  }

  async markProcessed(id: string, type: string, at: Date): Promise<void> {
    await this.db('stripe_events').insert({ id, type, processed_at: at }).onConflict('id').ignore();
  }

  async ensureCursor(name: string, createdThrough: number, now: Date): Promise<void> {
    await this.db.raw('INSERT INTO stripe_event_cursors (name, created_through, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING', [name, createdThrough, now]);
  }

  async leaseCursor(name: string, owner: string, now: Date, until: Date): Promise<StripeEventCursor | undefined> {
    // One conditional statement: of two workers, the second finds the lease live and gets nothing.
    const result = await this.db.raw(
      `UPDATE stripe_event_cursors SET lease_owner = ?, leased_until = ?
       WHERE name = ? AND (leased_until IS NULL OR leased_until <= ? OR lease_owner = ?)
       RETURNING created_through`,
      [owner, until, name, now, owner],
    );
    const row = result.rows[0] as { created_through: string | number } | undefined;
    return row ? { createdThrough: Number(row.created_through) } : undefined;
  }

  async saveCursor(name: string, owner: string, createdThrough: number, until: Date, now: Date): Promise<boolean> {
    const saved = await this.db('stripe_event_cursors')
      .where({ name, lease_owner: owner })
      .update({ created_through: this.db.raw('GREATEST(created_through, ?)', [createdThrough]), leased_until: until, updated_at: now });
    return saved === 1;
  }

  async releaseCursor(name: string, owner: string): Promise<void> {
    await this.db('stripe_event_cursors').where({ name, lease_owner: owner }).update({ lease_owner: null, leased_until: null });
  }
}
