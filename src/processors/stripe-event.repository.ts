import type { Knex } from 'knex';

/** Stripe events already applied, by Stripe's event id. */
export interface StripeEventRepository {
  isProcessed(id: string): Promise<boolean>;
  /** Remembers an applied event; a second mark of the same id (a concurrent redelivery) is a no-op. */
  markProcessed(id: string, type: string, at: Date): Promise<void>;
}

export class KnexStripeEventRepository implements StripeEventRepository {
  constructor(private readonly db: Knex) {}

  async isProcessed(id: string): Promise<boolean> {
    return (await this.db('stripe_events').where({ id }).first('id')) !== undefined;
  }

  async markProcessed(id: string, type: string, at: Date): Promise<void> {
    await this.db('stripe_events').insert({ id, type, processed_at: at }).onConflict('id').ignore();
  }
}
