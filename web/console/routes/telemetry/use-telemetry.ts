/** The telemetry explorer's data hooks: one per resource, over the console's documented operations. */
import { consoleApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';
import type { paths } from '../../../../generated/console';

export type TraceQuery = NonNullable<paths['/v1/console/telemetry-projects/{project_id}/traces']['get']['parameters']['query']>;
export type GroupQuery = NonNullable<paths['/v1/console/telemetry-projects/{project_id}/sessions']['get']['parameters']['query']>;

export const useProjects = () => useApi(() => consoleApi.GET('/v1/console/telemetry-projects').then((r) => ({ ...r, data: r.data?.data })), []);

export const useTraces = (projectId: string, query: TraceQuery, tick: number) =>
  useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{project_id}/traces', { params: { path: { project_id: projectId }, query } }).then((r) => ({ ...r, data: r.data?.data })),
    [projectId, JSON.stringify(query), tick],
  );

export const useTrace = (projectId: string, traceId: string) =>
  useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{project_id}/traces/{trace_id}', { params: { path: { project_id: projectId, trace_id: traceId } } }).then((r) => ({ ...r, data: r.data?.data })),
    [projectId, traceId],
  );

export const useSessions = (projectId: string, query: GroupQuery) =>
  useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{project_id}/sessions', { params: { path: { project_id: projectId }, query } }).then((r) => ({ ...r, data: r.data?.data })),
    [projectId, JSON.stringify(query)],
  );

export const useUsers = (projectId: string, query: GroupQuery) =>
  useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{project_id}/users', { params: { path: { project_id: projectId }, query } }).then((r) => ({ ...r, data: r.data?.data })),
    [projectId, JSON.stringify(query)],
  );
