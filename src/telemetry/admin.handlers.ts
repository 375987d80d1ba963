/** Admin API: telemetry projects and telemetry API keys of an organization. */
import type { AdminHandlers } from '../handler-maps.js';
import { iso, isoOrNull } from '../kernel/present.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { TelemetryKeyService } from './keys.service.js';
import type { Project, TelemetryKey } from './projects.repository.js';
import type { ProjectService } from './projects.service.js';

export const presentProject = (p: Project) => ({
  projectId: p.id,
  orgId: p.orgId,
  name: p.name,
  slug: p.slug,
  environment: p.environment,
  description: p.description,
  sampleRate: p.sampleRate,
  dataRetentionDays: p.dataRetentionDays,
  createdAt: iso(p.createdAt),
  updatedAt: iso(p.updatedAt),
});

export const presentTelemetryKey = (k: TelemetryKey) => ({
  telemetryKeyId: k.id,
  orgId: k.orgId,
  projectId: k.projectId,
  name: k.name,
  prefix: k.prefix,
  revoked: k.revokedAt !== null,
  createdAt: iso(k.createdAt),
  revokedAt: isoOrNull(k.revokedAt),
});

type TelemetryAdminHandlers = Pick<
  AdminHandlers,
  'listTelemetryProjects' | 'createTelemetryProject' | 'listTelemetryKeys' | 'createTelemetryKey' | 'revokeTelemetryKey'
>;

export function createTelemetryAdminHandlers(deps: { orgs: OrgService; projects: ProjectService; keys: TelemetryKeyService }): TelemetryAdminHandlers {
  return {
    listTelemetryProjects: async ({ params }) => {
      await deps.orgs.getOrganization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: (await deps.projects.list(params.id)).map(presentProject) } };
    },
    createTelemetryProject: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Telemetry project created', data: presentProject(await deps.projects.create(params.id, body)) },
    }),
    listTelemetryKeys: async ({ params }) => {
      await deps.orgs.getOrganization(params.id);
      return { status: 200, body: { success: true, message: 'OK', data: (await deps.keys.list(params.id)).map(presentTelemetryKey) } };
    },
    createTelemetryKey: async ({ params, body }) => {
      await deps.orgs.getOrganization(params.id);
      const created = await deps.keys.create(params.id, body);
      return {
        status: 201,
        body: {
          success: true,
          message: 'Telemetry API key created; store it now, it is not shown again',
          data: { ...presentTelemetryKey(created), key: created.key },
        },
      };
    },
    revokeTelemetryKey: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Telemetry API key revoked', data: presentTelemetryKey(await deps.keys.revoke(params.id)) },
    }),
  };
}
