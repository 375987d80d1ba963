/**
 * The model price table a project's spans are priced with: built-in list prices, the deployment's
 * TELEMETRY_PRICES, and the project's own overrides on top (applied to spans ingested afterwards).
 */
import type { Clock } from '../kernel/clock.js';
import { AppError, notFound } from '../kernel/errors.js';
import type { ModelPriceRepository } from './model-prices.repository.js';
import type { PriceEntry, PriceTable } from './prices.js';
import type { ProjectRepository } from './projects.repository.js';

/** Overrides per project: enough for every fine-tune, bounded so the table stays small to load per batch. */
export const MAX_PROJECT_PRICES = 500;

export class ModelPriceService {
  constructor(
    private readonly prices: ModelPriceRepository,
    private readonly projects: ProjectRepository,
    private readonly table: PriceTable,
    private readonly clock: Clock,
  ) {}

  private async project(orgId: string, projectId: string): Promise<void> {
    if (!(await this.projects.findProject(orgId, projectId))) throw notFound('Project');
  }

  /** The table new spans of the project are priced with (no project check: the caller holds it). */
  async tableFor(projectId: string): Promise<PriceTable> {
    return this.table.withProjectPrices(await this.prices.listPrices(projectId));
  }

  async list(orgId: string, projectId: string): Promise<PriceEntry[]> {
    await this.project(orgId, projectId);
    return [...(await this.tableFor(projectId)).list().values()];
  }

  async set(orgId: string, projectId: string, price: { model: string; input: number; output: number }): Promise<PriceEntry> {
    await this.project(orgId, projectId);
    const outcome = await this.prices.upsertPrice(projectId, price, this.clock.now(), MAX_PROJECT_PRICES);
    if (outcome === 'limit') {
      throw new AppError('CONFLICT', `The project already has the maximum of ${MAX_PROJECT_PRICES} model price overrides`, {
        details: { limit: MAX_PROJECT_PRICES },
      });
    }
    return { ...price, source: 'project' };
  }

  async delete(orgId: string, projectId: string, model: string): Promise<void> {
    await this.project(orgId, projectId);
    if (!(await this.prices.deletePrice(projectId, model))) throw notFound('Model price');
  }
}
