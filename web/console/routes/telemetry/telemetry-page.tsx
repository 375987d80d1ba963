/**
 * The telemetry explorer's routes: /console/telemetry (projects), …/{project}/traces,
 * …/{project}/traces/{trace}?span=…, …/{project}/sessions, …/{project}/metrics, …/{project}/prices, …/{project}/users, …/{project}/settings.
 */
import { useLocation } from 'preact-iso';
import { Empty, ErrorNotice, Loading, PageHeader } from '../../components/ui';
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

function Projects() {
  const projects = useProjects();
  return (
    <>
      <PageHeader title="Telemetry" />
      <ErrorNotice message={projects.error} retry={projects.reload} />
      {!projects.data && projects.loading && <Loading />}
      {projects.data && projects.data.length === 0 && <Empty>No telemetry project yet.</Empty>}
      {projects.data && projects.data.length > 0 && (
        <ul>
          {projects.data.map((p) => (
            <li key={p.projectId}>
              <a href={`/console/telemetry/${p.projectId}/traces`}>{p.name}</a> <span class="muted small">{p.environment}</span>{' '}
              <a href={`/console/telemetry/${p.projectId}/settings`} aria-label={`${p.name} settings`}>
                Settings
              </a>
            </li>
          ))}
        </ul>
      )}
    </>
  );
}
