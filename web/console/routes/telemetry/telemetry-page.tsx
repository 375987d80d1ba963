/**
 * The telemetry explorer's routes: /console/telemetry (projects), …/{project}/traces,
 * …/{project}/traces/{trace}?span=…, …/{project}/sessions, …/{project}/metrics, …/{project}/prices, …/{project}/users, …/{project}/settings.
 * The projects page creates a project (then opens its settings: a key and the snippets); the settings page renames and deletes it.
 */
import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { consoleApi } from '../../shared/api';
import { useSession } from '../../shared/session';
import { useAction } from '../../shared/use-api';
import { MetricsPage } from './metrics-page';
import { PricesPage } from './prices-page';
import { SessionsPage } from './sessions-page';
import { SettingsPage } from './settings-page';
import { TracePage } from './trace-page';
import { TracesPage } from './traces-page';
import { UsersPage } from './users-page';
import { useProjects } from './use-telemetry';

export function TelemetryPage() {
  const { path } = useLocation();
  const parts = path.replace(/^\/console\/telemetry\/?/, '').split('/').filter(Boolean);
  const [projectId, section, id] = parts;
  if (projectId && section === 'traces' && id) return <TracePage projectId={projectId} traceId={id} />;
  if (projectId && section === 'sessions') return <SessionsPage projectId={projectId} />;
  if (projectId && section === 'metrics') return <MetricsPage projectId={projectId} />;
  if (projectId && section === 'prices') return <PricesPage projectId={projectId} />;
  if (projectId && section === 'settings') return <SettingsPage projectId={projectId} />;
  if (projectId && section === 'users') return <UsersPage projectId={projectId} />;
  if (projectId) return <TracesPage projectId={projectId} />;
  return <Projects />;
}

const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
type Environment = (typeof ENVIRONMENTS)[number];

function Projects() {
  const { can } = useSession();
  const { route } = useLocation();
  const projects = useProjects();
  const manage = can('telemetry:manage');
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState<Environment>('production');
  const create = useAction((body: { name: string; environment: Environment }) => consoleApi.POST('/v1/console/telemetry-projects', { body }).then((r) => ({ ...r, data: r.data?.data })));
  const submit = async (e: Event) => {
    e.preventDefault();
    const made = await create.run({ name: name.trim(), environment });
    // The new project's settings page: its first telemetry key and the snippets that send traces.
    if (made) route(`/console/telemetry/${made.projectId}/settings`);
  };
  return (
    <>
      <PageHeader title="Telemetry" />
      <ErrorNotice message={projects.error} retry={projects.reload} />
      {!projects.data && projects.loading && <Loading />}
      {projects.data && projects.data.length === 0 && <Empty>No telemetry project yet.{manage ? ' Create one below to send traces to it.' : ''}</Empty>}
      {projects.data && projects.data.length > 0 && (
        <ul class="project-list">
          {projects.data.map((p) => (
            <li key={p.projectId}>
              <a href={`/console/telemetry/${p.projectId}/traces`}>{p.name}</a>{' '}
              <span class="muted small" title="The deployment whose traces the project holds, named when it was created (production unless another was named); change it in the project's settings.">
                Environment: {p.environment}
              </span>{' '}
              <a href={`/console/telemetry/${p.projectId}/settings`} aria-label={`${p.name} settings`}>
                Settings
              </a>
            </li>
          ))}
        </ul>
      )}
      {manage && (
        <form class="card" onSubmit={submit} aria-labelledby="new-project-title">
          <h2 id="new-project-title">New project</h2>
          <p class="muted small" id="new-project-help">
            A project holds the traces of one application in one environment. The environment is a label of yours (the API and the CLI name it production when not told otherwise); it can be changed later.
          </p>
          <label for="new-project-name">Name</label>
          <input id="new-project-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby="new-project-help" />
          <label for="new-project-environment">Environment</label>
          <select id="new-project-environment" value={environment} onChange={(e) => setEnvironment(e.currentTarget.value as Environment)}>
            {ENVIRONMENTS.map((env) => (
              <option key={env} value={env}>
                {env}
              </option>
            ))}
          </select>
          <ErrorNotice message={create.error} />
          <button type="submit" class="primary" disabled={create.pending}>
            Create project
          </button>
        </form>
      )}
    </>
  );
}
