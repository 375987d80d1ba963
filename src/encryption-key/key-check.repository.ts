import type { Db } from '../db/knex.js';

/**
 * Every column holding a value sealed with the encryption key, each sealed with its row's id as
 * associated data. A new sealed column belongs here, so an upgrade checks it too.
 */
export const SEALED_COLUMNS = {
  'webhook signing keys': { table: 'webhook_signing_keys', column: 'private_key_sealed' },
  'agent wallet keys': { table: 'agent_wallets', column: 'private_key_sealed' },
} as const;

export type SealedSource = keyof typeof SEALED_COLUMNS;

export interface SealedSecret {
  id: string;
  sealed: string;
}

export interface KeyCheckRepository {
  findCheckValue(): Promise<string | undefined>;
  /** Stores the check value unless one is already stored (another process may record first). */
  insertCheckValueIfAbsent(sealed: string, createdAt: Date): Promise<void>;
  /** Sealed values of one source in id order, after `afterId`. */
  listSealed(source: SealedSource, afterId: string | undefined, limit: number): Promise<SealedSecret[]>;
}

export class KnexKeyCheckRepository implements KeyCheckRepository {
  constructor(private readonly db: Db) {}

  async findCheckValue(): Promise<string | undefined> {
    const row = await this.db('encryption_key_check').first('sealed_value');
    return row ? (row.sealed_value as string) : undefined;
  }

  async insertCheckValueIfAbsent(sealed: string, createdAt: Date): Promise<void> {
    await this.db.raw('INSERT INTO encryption_key_check (sealed_value, created_at) VALUES (?, ?) ON CONFLICT (singleton) DO NOTHING', [sealed, createdAt]);
  }

  async listSealed(source: SealedSource, afterId: string | undefined, limit: number): Promise<SealedSecret[]> {
    const { table, column } = SEALED_COLUMNS[source];
    const query = this.db(table).select({ id: 'id', sealed: column }).orderBy('id').limit(limit);
    if (afterId !== undefined) query.where('id', '>', afterId);
    return (await query) as SealedSecret[];
  }
}
