/**
 * The model price table a project's new spans are priced with (built in, the deployment's, the
 * project's overrides), and, for members with telemetry:manage, setting or removing an override.
 */
import { ErrorNotice, Loading, PageHeader } from '../../components/ui';
import { consoleApi } from '../../shared/api';
import { useSession } from '../../shared/session';
import { useAction, useApi } from '../../shared/use-api';

export function PricesPage(props: { projectId: string }) {
  const { can } = useSession();
  const prices = useApi(
    () => consoleApi.GET('/v1/console/telemetry-projects/{project_id}/model-prices', { params: { path: { project_id: props.projectId } } }).then((r) => ({ ...r, data: r.data?.data })),
    [props.projectId],
  );
  const save = useAction((model: string, input: number, output: number) =>
    consoleApi.PUT('/v1/console/telemetry-projects/{project_id}/model-prices', { params: { path: { project_id: props.projectId } }, body: { model, input_per_million: input, output_per_million: output } }),
  );
  const remove = useAction((model: string) => consoleApi.DELETE('/v1/console/telemetry-projects/{project_id}/model-prices', { params: { path: { project_id: props.projectId }, query: { model } } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    if (await save.run(String(form.get('model')), Number(form.get('input')), Number(form.get('output')))) prices.reload();
  };
  return (
    <>
      <PageHeader title="Model prices">
        <a href={`/console/telemetry/${props.projectId}/traces`}>Traces</a>
      </PageHeader>
      <p class="muted small">USD per million tokens. An override prices spans ingested after it is saved; stored spans keep their cost.</p>
      {can('telemetry:manage') && (
        <form class="toolbar" onSubmit={submit} aria-label="Override a model's price">
          <label>
            Model
            <input name="model" required maxLength={200} />
          </label>
          <label>
            Input
            <input name="input" required inputMode="decimal" pattern="\d+(\.\d+)?" />
          </label>
          <label>
            Output
            <input name="output" required inputMode="decimal" pattern="\d+(\.\d+)?" />
          </label>
          <button type="submit" disabled={save.pending}>
            Save override
          </button>
        </form>
      )}
      <ErrorNotice message={save.error ?? remove.error} />
      <ErrorNotice message={prices.error} retry={prices.reload} />
      {!prices.data && prices.loading && <Loading />}
      {prices.data && (
        <div class="table-wrap">
          <table aria-label="Model prices">
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Input</th>
                <th scope="col">Output</th>
                <th scope="col">Source</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {prices.data.map((p) => (
                <tr key={p.model} data-model={p.model}>
                  <td class="mono">{p.model}</td>
                  <td>{p.input_per_million}</td>
                  <td>{p.output_per_million}</td>
                  <td>{p.source}</td>
                  <td>
                    {p.source === 'project' && can('telemetry:manage') && (
                      <button type="button" class="link" onClick={async () => (await remove.run(p.model)) && prices.reload()}>
                        Remove override of {p.model}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
