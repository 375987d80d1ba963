/**
 * The console's telemetry operations (openapi/console.yaml, tag Telemetry): a member's door to
 * the same ProjectService and TelemetryKeyService as the telemetry and admin APIs, scoped to the
 * session's organization (another organization's project or key is 404).
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { isoOrNull } from '../kernel/present.js';
import type { TelemetryKeyService } from './keys.service.js';
import type { TelemetryKey } from './projects.repository.js';
import type { ProjectService } from './projects.service.js';
import { presentProject, presentTelemetryKey } from './admin.handlers.js';

type TelemetryConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'listConsoleTelemetryProjects'
  | 'createConsoleTelemetryProject'
  | 'getConsoleTelemetryProject'
  | 'updateConsoleTelemetryProject'
  | 'deleteConsoleTelemetryProject'
  | 'listConsoleTelemetryKeys'
  | 'createConsoleTelemetryKey'
  | 'revokeConsoleTelemetryKey'
>;

const presentKey = (k: TelemetryKey) => ({ ...presentTelemetryKey(k), lastUsedAt: isoOrNull(k.lastUsedAt) });

export function createTelemetryConsoleHandlers(deps: { projects: ProjectService; keys: TelemetryKeyService; publicApiUrl: string }): TelemetryConsoleHandlers {
  const { projects, keys } = deps;
  const otlpEndpoint = `${deps.publicApiUrl.replace(/\/+$/, '')}/v1/otlp`;
  return {
    listConsoleTelemetryProjects: async ({ auth }) => ({ status: 200, body: { success: true, message: 'OK', data: (await projects.list(auth.orgId)).map(presentProject) } }),
    createConsoleTelemetryProject: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Telemetry project created', data: presentProject(await projects.create(auth.orgId, body)) },
    }),
    getConsoleTelemetryProject: async ({ auth, params }) => {
      const { project, stats } = await projects.getWithStats(auth.orgId, params.id);
      return { status: 200, body: { success: true, message: 'OK', data: { ...presentProject(project), stats: { tracesToday: stats.tracesToday, tracesThisMonth: stats.tracesThisMonth }, otlpEndpoint } } };
    },
    updateConsoleTelemetryProject: async ({ auth, params, body }) => ({
      status: 200,
      body: {
        success: true,
        message: 'Telemetry project updated',
        data: presentProject(
          await projects.update(auth.orgId, params.id, {
            name: body.name,
            description: body.description,
            environment: body.environment,
            sampleRate: body.sampleRate,
            dataRetentionDays: body.dataRetentionDays,
          }),
        ),
      },
    }),
    deleteConsoleTelemetryProject: async ({ auth, params }) => {
      await projects.delete(auth.orgId, params.id);
      return { status: 204, body: undefined };
    },
    listConsoleTelemetryKeys: async ({ auth, query }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await keys.list(auth.orgId, query.project_id)).map(presentKey) },
    }),
    createConsoleTelemetryKey: async ({ auth, body }) => {
      // The member's key: revoked when they leave or lose telemetry:manage (src/accounts, removeMember).
      const created = await keys.create(auth.orgId, { ...body, createdBy: `user:${auth.actor.id}` });
      return {
        status: 201,
        headers: { 'Cache-Control': 'no-store' },
        body: { success: true, message: 'Telemetry key created; store it now, it is not shown again', data: { ...presentKey(created), key: created.key } },
      };
    },
    revokeConsoleTelemetryKey: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Telemetry key revoked', data: presentKey(await keys.revoke(params.id, auth.orgId)) },
    }),
  };
}
