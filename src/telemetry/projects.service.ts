/** Telemetry projects: creation (slug, limit), reads with statistics, updates, guarded deletion. */
import type { Clock } from '../kernel/clock.js';
import { newId } from '../kernel/ids.js';
import { AppError, notFound } from '../kernel/errors.js';
import type { Environment, Project, ProjectPatch, ProjectRepository } from './projects.repository.js';

/** An organization holds at most this many projects (openapi/telemetry.yaml, createProject). */
export const MAX_PROJECTS_PER_ORG = 100;
export const DEFAULT_SAMPLE_RATE = 1;
export const DEFAULT_RETENTION_DAYS = 30;

/** `Support Assistant (EU)` → `support-assistant-eu`; `project` when nothing is left. */
export function slugify(name: string): string {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return slug || 'project';
}

export const startOfUtcDay = (d: Date): Date => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
export const startOfUtcMonth = (d: Date): Date => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
export const startOfNextUtcMonth = (d: Date): Date => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));

export interface ProjectStats {
  tracesToday: number;
  tracesThisMonth: number;
}

export class ProjectService {
  constructor(
    private readonly repo: ProjectRepository,
    private readonly clock: Clock,
  ) {}

  async create(orgId: string, input: { name: string; environment?: Environment; description?: string | null }): Promise<Project> {
    const outcome = await this.repo.createProject(
      {
        id: newId('PRJ'),
        orgId,
        name: input.name,
        baseSlug: slugify(input.name),
        environment: input.environment ?? 'production',
        description: input.description ?? null,
        sampleRate: DEFAULT_SAMPLE_RATE,
        dataRetentionDays: DEFAULT_RETENTION_DAYS,
        now: this.clock.now(),
      },
      MAX_PROJECTS_PER_ORG,
    );
    if ('project' in outcome) return outcome.project;
    if (outcome.error === 'organization_not_found') throw notFound('Organization');
    throw new AppError('CONFLICT', `The organization already has the maximum of ${outcome.limit} projects`, {
      details: { limit: outcome.limit },
    });
  }

  list(orgId: string): Promise<Project[]> {
    return this.repo.listProjects(orgId);
  }

  async get(orgId: string, id: string): Promise<Project> {
    const project = await this.repo.findProject(orgId, id);
    if (!project) throw notFound('Project');
    return project;
  }

  async getWithStats(orgId: string, id: string): Promise<{ project: Project; stats: ProjectStats }> {
    const project = await this.get(orgId, id);
    const now = this.clock.now();
    const counts = await this.repo.countTracesSince(project.id, startOfUtcDay(now), startOfUtcMonth(now));
    return { project, stats: { tracesToday: counts.today, tracesThisMonth: counts.month } };
  }

  async update(orgId: string, id: string, patch: ProjectPatch): Promise<Project> {
    const updated = await this.repo.updateProject(orgId, id, patch, this.clock.now());
    if (!updated) throw notFound('Project');
    return updated;
  }

  async delete(orgId: string, id: string): Promise<void> {
    const outcome = await this.repo.deleteProject(orgId, id);
    if (!outcome) throw notFound('Project');
    if ('activeKeys' in outcome) {
      throw new AppError('CONFLICT', 'The project has active API keys; revoke them before deleting the project', {
        details: { project_id: id, active_api_keys: outcome.activeKeys },
      });
    }
  }
}
