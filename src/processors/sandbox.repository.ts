import type { Knex } from 'knex';

export interface SandboxPayment {
  id: string;
  orgId: string;
  checkoutSessionId: string;
  outcome: 'succeeded' | 'failed';
  cardLast4: string;
  state: 'pending' | 'succeeded' | 'failed';
  settleAt: Date | null;
  createdAt: Date;
}

interface SandboxPaymentRow {
  id: string;
  org_id: string;
  checkout_session_id: string;
  outcome: 'succeeded' | 'failed';
  card_last4: string;
  state: 'pending' | 'succeeded' | 'failed';
  settle_at: Date | null;
  created_at: Date;
}

const toPayment = (r: SandboxPaymentRow): SandboxPayment => ({
  id: r.id,
  orgId: r.org_id,
  checkoutSessionId: r.checkout_session_id,
  outcome: r.outcome,
  cardLast4: r.card_last4,
  state: r.state,
  settleAt: r.settle_at ? new Date(r.settle_at) : null,
  createdAt: new Date(r.created_at),
});

export interface SandboxPaymentRepository {
  /** False when the session already has an accepted payment. */
  insertAccepted(payment: SandboxPayment): Promise<boolean>;
  listDue(now: Date, limit: number): Promise<SandboxPayment[]>;
  markSettled(id: string, state: 'succeeded' | 'failed'): Promise<void>;
}

export class KnexSandboxPaymentRepository implements SandboxPaymentRepository {
  constructor(private readonly db: Knex) {}

  async insertAccepted(p: SandboxPayment): Promise<boolean> {
    const result = await this.db.raw(
      `INSERT INTO sandbox_payments (id, org_id, checkout_session_id, outcome, card_last4, state, settle_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (checkout_session_id) WHERE state IN ('pending', 'succeeded') DO NOTHING RETURNING id`,
      [p.id, p.orgId, p.checkoutSessionId, p.outcome, p.cardLast4, p.state, p.settleAt, p.createdAt],
    );
    return (result.rows as unknown[]).length === 1;
  }

  async listDue(now: Date, limit: number): Promise<SandboxPayment[]> {
    const rows = await this.db<SandboxPaymentRow>('sandbox_payments')
      .where({ state: 'pending' })
      .andWhere('settle_at', '<=', now)
      .orderBy('settle_at')
      .limit(limit);
    return rows.map(toPayment);
  }

  async markSettled(id: string, state: 'succeeded' | 'failed'): Promise<void> {
    await this.db('sandbox_payments').where({ id, state: 'pending' }).update({ state });
  }
}
