/** Telemetry projects, their API keys and the per-key rate-limit windows. The only knex of this part. */
import type { Db } from '../db/knex.js';

export type Environment = 'development' | 'staging' | 'production';

export interface Project {
  id: string;
  orgId: string;
  name: string;
  slug: string;
  environment: Environment;
  description: string | null;
  sampleRate: number;
  dataRetentionDays: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface TelemetryKey {
  id: string;
  orgId: string;
  projectId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
  /** The start of the last rate-limit window (a minute by default) in which the key was used. */
  lastUsedAt: Date | null;
  /** `user:USR_…` for a key a member made in the console (revoked when they leave); null for the operator's. */
  createdBy?: string | null;
}

export interface TelemetryKeyWithHash extends TelemetryKey {
  keyHash: string;
}

export interface NewProject {
  id: string;
  orgId: string;
  name: string;
  baseSlug: string;
  environment: Environment;
  description: string | null;
  sampleRate: number;
  dataRetentionDays: number;
  now: Date;
}

export type ProjectPatch = Partial<Pick<Project, 'name' | 'description' | 'environment' | 'sampleRate' | 'dataRetentionDays'>>;

export type CreateProjectOutcome = { project: Project } | { error: 'organization_not_found' } | { error: 'limit'; limit: number };
export type DeleteProjectOutcome = { deleted: true } | { activeKeys: number } | undefined;

export interface ProjectRepository {
  /** Creates the project with the first free slug `base`, `base-2`, … unless the org has `maxProjects`. */
  createProject(input: NewProject, maxProjects: number): Promise<CreateProjectOutcome>;
  listProjects(orgId: string): Promise<Project[]>;
  findProject(orgId: string, id: string): Promise<Project | undefined>;
  updateProject(orgId: string, id: string, patch: ProjectPatch, now: Date): Promise<Project | undefined>;
  /** Deletes the project and (by cascade) all its data, unless it has unrevoked keys. */
  deleteProject(orgId: string, id: string): Promise<DeleteProjectOutcome>;
  countTracesSince(projectId: string, dayStart: Date, monthStart: Date): Promise<{ today: number; month: number }>;
  /** Every project with its retention, for the retention job. */
  listRetention(): Promise<Array<{ id: string; dataRetentionDays: number }>>;

  insertKey(key: TelemetryKeyWithHash): Promise<void>;
  /**
   * Resolves a key by hash and counts one request in its current rate-limit window, in one round
   * trip. Revoked keys are returned (so the caller can refuse them) but not counted.
   */
  authenticate(keyHash: string, windowStart: Date): Promise<{ key: TelemetryKeyWithHash; requests: number } | undefined>;
  listKeys(orgId: string, projectId?: string): Promise<TelemetryKey[]>;
  /** Revokes the key (with `orgId`: only that organization's); undefined when there is no such key. */
  revokeKey(id: string, now: Date, orgId?: string): Promise<TelemetryKey | undefined>;
  /** Revokes the organization's live keys made by `createdBy` (`user:…`); the keys revoked. */
  revokeKeysCreatedBy(orgId: string, createdBy: string, now: Date): Promise<TelemetryKey[]>;
  deleteRateWindowsBefore(before: Date): Promise<number>;
}

interface ProjectRow {
  id: string;
  org_id: string;
  name: string;
  slug: string;
  environment: Environment;
  description: string | null;
  sample_rate: number;
  data_retention_days: number;
  created_at: Date;
  updated_at: Date;
}

interface KeyRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string;
  key_hash: string;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at?: Date | null;
  created_by?: string | null;
}

const toProject = (row: ProjectRow): Project => ({
  id: row.id,
  orgId: row.org_id,
  name: row.name,
  slug: row.slug,
  environment: row.environment,
  description: row.description,
  sampleRate: Number(row.sample_rate),
  dataRetentionDays: Number(row.data_retention_days),
  createdAt: new Date(row.created_at),
  updatedAt: new Date(row.updated_at),
});

const toKey = (row: KeyRow): TelemetryKeyWithHash => ({
  id: row.id,
  orgId: row.org_id,
  projectId: row.project_id,
  name: row.name,
  keyHash: row.key_hash,
  prefix: row.prefix,
  createdAt: new Date(row.created_at),
  revokedAt: row.revoked_at ? new Date(row.revoked_at) : null,
  lastUsedAt: row.last_used_at ? new Date(row.last_used_at) : null,
  createdBy: row.created_by ?? null,
});

const withoutHash = ({ keyHash: _hash, ...key }: TelemetryKeyWithHash): TelemetryKey => key;

export class KnexProjectRepository implements ProjectRepository {
  constructor(private readonly db: Db) {}

  async createProject(input: NewProject, maxProjects: number): Promise<CreateProjectOutcome> {
    return this.db.transaction(async (trx) => {
      // The organization row serialises project creation: the count and the slug choice hold.
      const org = await trx('organizations').where({ id: input.orgId }).forUpdate().first('id');
      if (!org) return { error: 'organization_not_found' as const };
      const existing = await trx<ProjectRow>('telemetry_projects').where({ org_id: input.orgId }).select('slug');
      if (existing.length >= maxProjects) return { error: 'limit' as const, limit: maxProjects };
      const taken = new Set(existing.map((r) => r.slug));
      let slug = input.baseSlug;
      for (let n = 2; taken.has(slug); n++) slug = `${input.baseSlug}-${n}`;
      const row: ProjectRow = {
        id: input.id,
        org_id: input.orgId,
        name: input.name,
        slug,
        environment: input.environment,
        description: input.description,
        sample_rate: input.sampleRate,
        data_retention_days: input.dataRetentionDays,
        created_at: input.now,
        updated_at: input.now,
      };
      await trx<ProjectRow>('telemetry_projects').insert(row);
      return { project: toProject(row) };
    });
  }

  async listProjects(orgId: string): Promise<Project[]> {
    const rows = await this.db<ProjectRow>('telemetry_projects')
      .where({ org_id: orgId })
      .orderBy([{ column: 'created_at', order: 'asc' }, { column: 'id', order: 'asc' }]);
    return rows.map(toProject);
  }

  async findProject(orgId: string, id: string): Promise<Project | undefined> {
    const row = await this.db<ProjectRow>('telemetry_projects').where({ org_id: orgId, id }).first();
    return row ? toProject(row) : undefined;
  }

  async updateProject(orgId: string, id: string, patch: ProjectPatch, now: Date): Promise<Project | undefined> {
    const changes: Partial<ProjectRow> = { updated_at: now };
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.environment !== undefined) changes.environment = patch.environment;
    if (patch.sampleRate !== undefined) changes.sample_rate = patch.sampleRate;
    if (patch.dataRetentionDays !== undefined) changes.data_retention_days = patch.dataRetentionDays;
    const [row] = await this.db<ProjectRow>('telemetry_projects').where({ org_id: orgId, id }).update(changes).returning('*');
    return row ? toProject(row as ProjectRow) : undefined;
  }

  async deleteProject(orgId: string, id: string): Promise<DeleteProjectOutcome> {
    return this.db.transaction(async (trx) => {
      // Locks the project against a key being issued for it meanwhile.
      const project = await trx('telemetry_projects').where({ org_id: orgId, id }).forUpdate().first('id');
      if (!project) return undefined;
      const row = await trx('telemetry_api_keys').where({ project_id: id }).whereNull('revoked_at').count<{ count: number }[]>({ count: '*' }).first();
      const activeKeys = Number(row?.count ?? 0);
      if (activeKeys > 0) return { activeKeys };
      // Children first: the cascade would do the same, but explicit deletes keep it one plan each.
      for (const table of ['telemetry_group_changes', 'telemetry_rollups', 'telemetry_metric_points', 'telemetry_model_calls', 'telemetry_users', 'telemetry_sessions', 'telemetry_traces', 'telemetry_trace_ids', 'telemetry_api_keys']) {
        await trx(table).where({ project_id: id }).delete();
      }
      await trx('telemetry_projects').where({ id }).delete();
      return { deleted: true as const };
    });
  }

  async countTracesSince(projectId: string, dayStart: Date, monthStart: Date): Promise<{ today: number; month: number }> {
    const row = await this.db('telemetry_traces')
      .where({ project_id: projectId })
      .andWhere('created_at', '>=', monthStart)
      .select(
        this.db.raw('count(*) filter (where created_at >= ?)::int as today', [dayStart]),
        this.db.raw('count(*)::int as month'),
      )
      .first();
    return { today: Number(row?.today ?? 0), month: Number(row?.month ?? 0) };
  }

  async listRetention(): Promise<Array<{ id: string; dataRetentionDays: number }>> {
    const rows = await this.db<ProjectRow>('telemetry_projects').select('id', 'data_retention_days').orderBy('id');
    return rows.map((r) => ({ id: r.id, dataRetentionDays: Number(r.data_retention_days) }));
  }

  async insertKey(key: TelemetryKeyWithHash): Promise<void> {
    await this.db<KeyRow>('telemetry_api_keys').insert({
      id: key.id,
      org_id: key.orgId,
      project_id: key.projectId,
      name: key.name,
      key_hash: key.keyHash,
      prefix: key.prefix,
      created_at: key.createdAt,
      revoked_at: key.revokedAt,
      created_by: key.createdBy ?? null,
    });
  }

  async revokeKeysCreatedBy(orgId: string, createdBy: string, now: Date): Promise<TelemetryKey[]> {
    const rows = await this.db<KeyRow>('telemetry_api_keys').where({ org_id: orgId, created_by: createdBy }).whereNull('revoked_at').update({ revoked_at: now }).returning('*');
    return (rows as KeyRow[]).map((row) => withoutHash(toKey(row)));
  }

  async authenticate(keyHash: string, windowStart: Date) {
    // The counter write commits without waiting for the WAL flush (synchronous_commit off for this
    // statement's transaction only): a crash may forget the last few counts, which at worst lets a
    // client make a few more requests, and every read request would otherwise wait for a flush.
    const result = await this.db.raw(
      `WITH k AS (
         SELECT * FROM telemetry_api_keys WHERE key_hash = ?
       ), counted AS (
         INSERT INTO telemetry_rate_limits (key_id, window_start, count)
         SELECT id, ?, 1 FROM k WHERE revoked_at IS NULL AND set_config('synchronous_commit', 'off', true) IS NOT NULL
         ON CONFLICT (key_id, window_start) DO UPDATE SET count = telemetry_rate_limits.count + 1
         RETURNING count
       ), touched AS (
         -- The key's last use, written once per window (its first request): the window's start.
         UPDATE telemetry_api_keys SET last_used_at = ?
          WHERE id = (SELECT id FROM k) AND (SELECT count FROM counted) = 1
         RETURNING 1
       )
       SELECT k.*, (SELECT count FROM counted) AS requests FROM k`,
      [keyHash, windowStart, windowStart],
    );
    const row = (result.rows as Array<KeyRow & { requests: number | null }>)[0];
    if (!row) return undefined;
    return { key: toKey(row), requests: Number(row.requests ?? 0) };
  }

  async listKeys(orgId: string, projectId?: string): Promise<TelemetryKey[]> {
    const rows = await this.db<KeyRow>('telemetry_api_keys')
      .where({ org_id: orgId, ...(projectId !== undefined ? { project_id: projectId } : {}) })
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]);
    return rows.map((row) => withoutHash(toKey(row)));
  }

  async revokeKey(id: string, now: Date, orgId?: string): Promise<TelemetryKey | undefined> {
    const scope = orgId === undefined ? { id } : { id, org_id: orgId };
    await this.db<KeyRow>('telemetry_api_keys').where(scope).whereNull('revoked_at').update({ revoked_at: now });
    const row = await this.db<KeyRow>('telemetry_api_keys').where(scope).first();
    return row ? withoutHash(toKey(row)) : undefined;
  }

  async deleteRateWindowsBefore(before: Date): Promise<number> {
    return this.db('telemetry_rate_limits').where('window_start', '<', before).delete();
  }
}
