/** Per-project model price overrides (telemetry_model_prices). */
import type { Db } from '../db/knex.js';
import type { ModelPrice } from './prices.js';

export interface ProjectModelPrice extends ModelPrice {
  model: string;
}

export interface ModelPriceRepository {
  /** The project's overrides, by model name. */
  listPrices(projectId: string): Promise<ProjectModelPrice[]>;
  /** Creates or replaces one override, unless the project already has `max` others: then 'limit'. */
  upsertPrice(projectId: string, price: ProjectModelPrice, now: Date, max: number): Promise<'ok' | 'limit'>;
  /** Whether an override was removed. */
  deletePrice(projectId: string, model: string): Promise<boolean>;
}

interface PriceRow {
  model: string;
  input_per_million: number;
  output_per_million: number;
}

export class KnexModelPriceRepository implements ModelPriceRepository {
  constructor(private readonly db: Db) {}

  async listPrices(projectId: string): Promise<ProjectModelPrice[]> {
    const rows = (await this.db('telemetry_model_prices')
      .select('model', 'input_per_million', 'output_per_million')
      .where('project_id', projectId)
      .orderBy('model')) as PriceRow[];
    return rows.map((r) => ({ model: r.model, input: Number(r.input_per_million), output: Number(r.output_per_million) }));
  }

  async upsertPrice(projectId: string, price: ProjectModelPrice, now: Date, max: number): Promise<'ok' | 'limit'> {
    return this.db.transaction(async (trx) => {
      // The project row lock serialises concurrent upserts, so the bound holds.
      await trx.raw('SELECT 1 FROM telemetry_projects WHERE id = ? FOR UPDATE', [projectId]);
      const others = await trx('telemetry_model_prices').where('project_id', projectId).whereNot('model', price.model).count<{ count: string | number }[]>('* as count');
      if (Number(others[0]!.count) >= max) return 'limit' as const;
      await trx.raw(
        `INSERT INTO telemetry_model_prices (project_id, model, input_per_million, output_per_million, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (project_id, model) DO UPDATE SET input_per_million = excluded.input_per_million,
           output_per_million = excluded.output_per_million, updated_at = excluded.updated_at`,
        [projectId, price.model, price.input, price.output, now, now],
      );
      return 'ok' as const;
    });
  }

  async deletePrice(projectId: string, model: string): Promise<boolean> {
    // RETURNING, not the affected-row count: the PGlite driver does not report the count.
    const rows = await this.db('telemetry_model_prices').where({ project_id: projectId, model }).delete().returning('model');
    return rows.length > 0;
  }
}
