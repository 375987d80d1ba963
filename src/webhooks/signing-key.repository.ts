import type { Db } from '../db/knex.js';

export interface SigningKey {
  id: string;
  /** Raw 32-byte Ed25519 public key. */
  publicKey: Buffer;
  privateKeySealed: string;
  createdAt: Date;
  retiredAt: Date | null;
  publishUntil: Date | null;
}

interface SigningKeyRow {
  id: string;
  public_key: string;
  private_key_sealed: string;
  created_at: Date;
  retired_at: Date | null;
  publish_until: Date | null;
}

const toSigningKey = (row: SigningKeyRow): SigningKey => ({
  id: row.id,
  publicKey: Buffer.from(row.public_key, 'base64'),
  privateKeySealed: row.private_key_sealed,
  createdAt: new Date(row.created_at),
  retiredAt: row.retired_at ? new Date(row.retired_at) : null,
  publishUntil: row.publish_until ? new Date(row.publish_until) : null,
});

export interface SigningKeyRepository {
  /** Inserts the key as current unless another current key exists; returns whether it was inserted. */
  insertIfNoCurrent(key: SigningKey): Promise<boolean>;
  findCurrent(): Promise<SigningKey | undefined>;
  /** The current key and retired keys still inside their publication grace period, newest first. */
  listPublished(now: Date): Promise<SigningKey[]>;
  /**
   * Retires the current key (still published until `publishUntil`) and inserts `next` as the
   * current key, atomically. Throws when another rotation committed in between (unique index).
   */
  rotate(next: SigningKey, now: Date, publishUntil: Date): Promise<SigningKey | undefined>;
}

export class KnexSigningKeyRepository implements SigningKeyRepository {
  constructor(private readonly db: Db) {}

  async insertIfNoCurrent(key: SigningKey): Promise<boolean> {
    const result = await this.db.raw(
      `INSERT INTO webhook_signing_keys (id, public_key, private_key_sealed, created_at, retired_at, publish_until)
       VALUES (?, ?, ?, ?, NULL, NULL) ON CONFLICT DO NOTHING RETURNING id`,
      [key.id, key.publicKey.toString('base64'), key.privateKeySealed, key.createdAt],
    );
    return (result.rows as unknown[]).length === 1;
  }

  async findCurrent(): Promise<SigningKey | undefined> {
    const row = await this.db<SigningKeyRow>('webhook_signing_keys').whereNull('retired_at').first();
    return row ? toSigningKey(row) : undefined;
  }

  async listPublished(now: Date): Promise<SigningKey[]> {
    const rows = await this.db<SigningKeyRow>('webhook_signing_keys')
      .whereNull('retired_at')
      .orWhere('publish_until', '>', now)
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]);
    return rows.map(toSigningKey);
  }

  async rotate(next: SigningKey, now: Date, publishUntil: Date): Promise<SigningKey | undefined> {
    return this.db.transaction(async (trx) => {
      const [retired] = await trx<SigningKeyRow>('webhook_signing_keys')
        .whereNull('retired_at')
        .update({ retired_at: now, publish_until: publishUntil })
        .returning('*');
      await trx<SigningKeyRow>('webhook_signing_keys').insert({
        id: next.id,
        public_key: next.publicKey.toString('base64'),
        private_key_sealed: next.privateKeySealed,
        created_at: next.createdAt,
        retired_at: null,
        publish_until: null,
      });
      return retired ? toSigningKey(retired as SigningKeyRow) : undefined;
    });
  }
}
