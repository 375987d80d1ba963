/**
 * A telemetry project's settings: name, environment, sample rate and retention (deletion last); its telemetry
 * keys (create — shown once, with a copy button —, list with last use, revoke); and the snippets
 * that send traces from Python and Node with the project's OTLP endpoint filled in
 * (docs/send-traces.md, word for word).
 */
import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../components/confirm';
import { Badge, CopyButton, Empty, ErrorNotice, Loading, PageHeader, Time } from '../../components/ui';
import { consoleApi, errorMessage } from '../../shared/api';
import { useSession } from '../../shared/session';
import { consoleTimeZone } from '../../shared/time-zone';
import { useAction, useApi } from '../../shared/use-api';
import { sendTracesSnippets } from './lib/snippets';

const ENVIRONMENTS = ['development', 'staging', 'production'] as const;
type Environment = (typeof ENVIRONMENTS)[number];

export function SettingsPage(props: { projectId: string }) {
  const { can } = useSession();
  const { route } = useLocation();
  const manage = can('telemetry:manage');
  const base = `/console/telemetry/${props.projectId}`;
  const project = useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{id}', { params: { path: { id: props.projectId } } }).then((r) => ({ ...r, data: r.data?.data })),
    [props.projectId],
  );
  const save = useAction((body: { name: string; environment: Environment; sampleRate: number; dataRetentionDays: number }) =>
    consoleApi.PATCH('/v1/console/telemetry-projects/{id}', { params: { path: { id: props.projectId } }, body }).then((r) => ({ ...r, data: r.data?.data })),
  );
  const [saved, setSaved] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const answer = await save.run({
      name: String(form.get('name')),
      environment: String(form.get('environment')) as Environment,
      sampleRate: Number(form.get('sampleRate')),
      dataRetentionDays: Number(form.get('dataRetentionDays')),
    });
    if (answer) {
      setSaved(true);
      project.reload();
    }
  };
  const p = project.data;
  return (
    <>
      <PageHeader title={p ? `${p.name} settings` : 'Project settings'}>
        <a href={`${base}/traces`}>Traces</a> <a href={`${base}/metrics`}>Metrics</a>
      </PageHeader>
      <ErrorNotice message={project.error} retry={project.reload} />
      {!p && project.loading && <Loading />}
      {p && (
        <>
          <form class="card" onSubmit={submit} aria-labelledby="project-title">
            <h2 id="project-title">Project</h2>
            <label for="project-name">Name</label>
            <input id="project-name" name="name" required maxLength={100} defaultValue={p.name} disabled={!manage} />
            <label for="project-environment">Environment</label>
            <select id="project-environment" name="environment" defaultValue={p.environment} disabled={!manage}>
              {ENVIRONMENTS.map((e) => (
                <option key={e} value={e} selected={e === p.environment}>
                  {e}
                </option>
              ))}
            </select>
            <label for="project-sample-rate">Sample rate (0–1, fraction of traces stored)</label>
            <input id="project-sample-rate" name="sampleRate" type="number" required min={0} max={1} step="any" defaultValue={String(p.sampleRate)} disabled={!manage} />
            <label for="project-retention">Retention (days)</label>
            <input id="project-retention" name="dataRetentionDays" type="number" required min={1} max={3650} step={1} defaultValue={String(p.dataRetentionDays)} disabled={!manage} />
            <p class="muted small">
              {p.stats.tracesToday} traces today, {p.stats.tracesThisMonth} this month.
            </p>
            <ErrorNotice message={save.error} />
            {saved && <p role="status">Saved.</p>}
            {manage && (
              <button type="submit" class="primary" disabled={save.pending}>
                Save
              </button>
            )}
          </form>
          {manage && <KeysSection projectId={props.projectId} />}
          <SnippetsSection endpoint={p.otlpEndpoint} />
          {manage && (
            <section class="card" aria-labelledby="delete-project-title">
              <h2 id="delete-project-title">Delete the project</h2>
              <p class="muted small">Deletes every trace, span and metric point of {p.name}. Revoke its active telemetry keys first.</p>
              <ConfirmButton
                label={`Delete ${p.name}…`}
                title={`Delete the project ${p.name}?`}
                confirmLabel="Delete project"
                danger
                onConfirm={async () => {
                  const answer = await consoleApi.DELETE('/v1/console/telemetry-projects/{id}', { params: { path: { id: props.projectId } } });
                  if (answer.error) return errorMessage(answer.error, answer.response);
                  route('/console/telemetry');
                }}
              >
                <p>Its traces, spans and metrics are deleted at once. This cannot be undone.</p>
              </ConfirmButton>
            </section>
          )}
        </>
      )}
    </>
  );
}

function KeysSection(props: { projectId: string }) {
  const keys = useApi(
    () => consoleApi.GET('/v1/console/telemetry-keys', { params: { query: { project_id: props.projectId } } }).then((r) => ({ ...r, data: r.data?.data })),
    [props.projectId],
  );
  const create = useAction((name: string) => consoleApi.POST('/v1/console/telemetry-keys', { body: { projectId: props.projectId, name } }).then((r) => ({ ...r, data: r.data?.data })));
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ name: string; key: string } | undefined>();
  const timeZone = consoleTimeZone();
  const submit = async (e: Event) => {
    e.preventDefault();
    const answer = await create.run(name);
    if (answer) {
      setCreated({ name: answer.name, key: answer.key });
      setName('');
      keys.reload();
    }
  };
  return (
    <section aria-labelledby="telemetry-keys-title">
      <h2 id="telemetry-keys-title">Telemetry keys</h2>
      {created && (
        <div class="secret" role="status">
          <div>
            <strong>{created.name}</strong>: copy the key now, it is not shown again.
            <div>
              <code data-testid="new-telemetry-key">{created.key}</code>
            </div>
          </div>
          <CopyButton text={created.key} label="Copy key" />
          <button type="button" onClick={() => setCreated(undefined)}>
            Done
          </button>
        </div>
      )}
      <form class="toolbar" onSubmit={submit} aria-label="New telemetry key">
        <label for="telemetry-key-name">Key name</label>
        <input id="telemetry-key-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <button type="submit" disabled={create.pending}>
          Create key
        </button>
      </form>
      <ErrorNotice message={create.error} />
      <ErrorNotice message={keys.error} retry={keys.reload} />
      {!keys.data && !keys.error && <Loading />}
      {keys.data && keys.data.length === 0 && <Empty>No telemetry key yet.</Empty>}
      {keys.data && keys.data.length > 0 && (
        <div class="table-wrap">
          <table aria-label="Telemetry keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col" class="hide-narrow">
                  Last used
                </th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.telemetryKeyId}>
                  <td>{key.name}</td>
                  <td>
                    <code>{key.prefix}…</code>
                  </td>
                  <td class="hide-narrow">{key.lastUsedAt ? <Time iso={key.lastUsedAt} timeZone={timeZone} /> : 'Never'}</td>
                  <td>
                    {key.revoked ? (
                      <Badge tone="neutral">Revoked</Badge>
                    ) : (
                      <ConfirmButton
                        label={`Revoke ${key.name}`}
                        title={`Revoke the key ${key.name}?`}
                        confirmLabel="Revoke key"
                        danger
                        onConfirm={async () => {
                          const answer = await consoleApi.POST('/v1/console/telemetry-keys/{id}/revoke', { params: { path: { id: key.telemetryKeyId } } });
                          if (answer.error) return errorMessage(answer.error, answer.response);
                          keys.reload();
                        }}
                      >
                        <p>Apps sending traces with this key will be refused at once. This cannot be undone.</p>
                      </ConfirmButton>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function SnippetsSection(props: { endpoint: string }) {
  const snippets = sendTracesSnippets(props.endpoint);
  const [current, setCurrent] = useState(snippets[0]!.id);
  const shown = snippets.find((s) => s.id === current) ?? snippets[0]!;
  return (
    <section aria-labelledby="send-traces-title">
      <h2 id="send-traces-title">Send traces</h2>
      <p>
        OTLP endpoint: <code data-testid="otlp-endpoint">{props.endpoint}</code> <CopyButton text={props.endpoint} label="Copy endpoint" />
      </p>
      <p class="muted small">
        Exporters append <code>/v1/traces</code>. Authenticate with <code>Authorization: Bearer tk_…</code> (set <code>KASSA_TELEMETRY_KEY</code> to a key above).
      </p>
      <div class="tabs" role="group" aria-label="Language and SDK">
        {snippets.map((s) => (
          <button key={s.id} type="button" aria-pressed={s.id === shown.id} onClick={() => setCurrent(s.id)}>
            {s.title}
          </button>
        ))}
      </div>
      {shown.blocks.map((block, i) => (
        <div key={`${shown.id}-${i}`} class="snippet">
          <pre class="payload" tabIndex={0} aria-label={`${shown.title}, ${block.lang === 'sh' ? 'commands' : 'code'} ${i + 1}`} data-testid={`snippet-${shown.id}-${i}`}>
            <code>{block.text}</code>
          </pre>
          <CopyButton text={block.text} label={`Copy ${block.lang === 'sh' ? 'commands' : 'code'}`} />
        </div>
      ))}
    </section>
  );
}
