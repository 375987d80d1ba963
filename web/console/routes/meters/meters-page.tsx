/**
 * Meters: the list (active or archived), a new meter, and one meter (edit its name and filter,
 * archive it), each form with the live preview of the last 30 days (issue 38 §9). Meters are the
 * merchant API's operations, the preview the console's (openapi/console.yaml previewConsoleMeter).
 */
import { useLocation, useRoute } from 'preact-iso';
import { ConfirmButton } from '../../components/confirm';
import { Badge, Empty, ErrorNotice, Fields, Loading, PageHeader, Time } from '../../components/ui';
import { errorMessage } from '../../shared/api';
import { useSession } from '../../shared/session';
import { consoleTimeZone } from '../../shared/time-zone';
import { useAction } from '../../shared/use-api';
import { MeterForm } from './components/meter-form';
import { definitionOf, EMPTY_FORM, formFromMeter, type MeterFormState } from './lib/meter-form';
import { archiveMeter, createMeter, updateMeter, useMeter, useMeters, type Meter } from './use-meters';

const AGGREGATION: Record<Meter['aggregation'], string> = { count: 'count', sum: 'sum', max: 'maximum', unique: 'distinct values', last: 'latest value' };

/** What a meter measures, in a few words ("sum of tokens over llm_tokens events"). */
export function meterSummary(m: Pick<Meter, 'source' | 'filter' | 'aggregation' | 'property'>): string {
  const what = m.aggregation === 'count' ? 'count' : `${AGGREGATION[m.aggregation]} of ${m.property}`;
  return m.source === 'EVENTS' ? `${what} over ${m.filter.eventName} events` : `${what} over the spans of ${m.filter.projectId}${m.filter.model ? ` (${m.filter.model})` : ''}`;
}

/** Submits a form's state: a definition the form cannot complete is said, not sent. */
async function submitNew(state: MeterFormState) {
  const defined = definitionOf(state);
  if ('error' in defined) return { error: { message: defined.error } };
  return createMeter({ name: state.name, ...defined.definition });
}
async function submitEdit(id: string, state: MeterFormState) {
  const defined = definitionOf(state);
  if ('error' in defined) return { error: { message: defined.error } };
  return updateMeter(id, { name: state.name, filter: defined.definition.filter });
}

export function MetersPage() {
  const { params } = useRoute();
  const rest = params.rest ?? '';
  const id = /^(MTR_[^/]+)$/.exec(rest)?.[1];
  return (
    <>
      <PageHeader title="Meters" />
      {rest === 'new' ? <NewMeterSection /> : id ? <MeterSection id={id} /> : <MetersSection />}
    </>
  );
}

function MetersSection() {
  const { query } = useLocation();
  const { can } = useSession();
  const status = query.status === 'ARCHIVED' ? 'ARCHIVED' : 'ACTIVE';
  const meters = useMeters(status);
  return (
    <section aria-labelledby="meters-title">
      <h2 id="meters-title">{status === 'ACTIVE' ? 'Active meters' : 'Archived meters'}</h2>
      <p>
        {status === 'ACTIVE' ? <a href="/console/meters?status=ARCHIVED">Show archived meters</a> : <a href="/console/meters">Show active meters</a>}
        {can('meters:write') && (
          <>
            {' · '}
            <a class="button primary" href="/console/meters/new">
              New meter
            </a>
          </>
        )}
      </p>
      <ErrorNotice message={meters.error} retry={meters.reload} />
      {!meters.data && !meters.error && <Loading />}
      {meters.data && meters.data.records.length === 0 && <Empty>{status === 'ACTIVE' ? 'No meters yet. A meter turns usage events or telemetry spans into a quantity per customer.' : 'No archived meters.'}</Empty>}
      {meters.data && meters.data.records.length > 0 && (
        <div class="table-wrap">
          <table data-testid="meters-table">
            <caption class="visually-hidden">{status === 'ACTIVE' ? 'Active meters' : 'Archived meters'}</caption>
            <thead>
              <tr>
                <th scope="col">Meter</th>
                <th scope="col" class="hide-narrow">Measures</th>
              </tr>
            </thead>
            <tbody>
              {meters.data.records.map((m) => (
                <tr key={m.id} data-testid="meter-row">
                  <td>
                    <a href={`/console/meters/${m.id}`}>{m.name}</a>
                    <div class="mono small">{m.id}</div>
                    <div class="muted small only-narrow">{meterSummary(m)}</div>
                  </td>
                  <td class="hide-narrow">{meterSummary(m)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function NewMeterSection() {
  const { route } = useLocation();
  const create = useAction(submitNew);
  return (
    <section aria-labelledby="new-meter-title">
      <p>
        <a href="/console/meters">← Meters</a>
      </p>
      <h2 id="new-meter-title" class="visually-hidden">
        New meter
      </h2>
      <MeterForm
        initial={EMPTY_FORM}
        submitLabel="Create meter"
        pending={create.pending}
        error={create.error}
        onSubmit={async (state) => {
          const made = await create.run(state);
          if (made) route(`/console/meters/${made.id}`);
        }}
      />
    </section>
  );
}

function MeterSection(props: { id: string }) {
  const { can } = useSession();
  const meter = useMeter(props.id);
  const edit = useAction(submitEdit);
  const timeZone = consoleTimeZone();
  const m = meter.data;
  return (
    <section aria-labelledby="meter-title">
      <p>
        <a href="/console/meters">← Meters</a>
      </p>
      <ErrorNotice message={meter.error} retry={meter.reload} />
      {!m && !meter.error && <Loading />}
      {m && (
        <>
          <h2 id="meter-title">
            {m.name} {m.status === 'ARCHIVED' && <Badge tone="neutral">archived</Badge>}
          </h2>
          <Fields
            items={[
              ['Id', <span class="mono">{m.id}</span>],
              ['Measures', meterSummary(m)],
              ['Created', <Time iso={m.createdAt} timeZone={timeZone} />],
              ...(m.archivedAt ? ([['Archived', <Time iso={m.archivedAt} timeZone={timeZone} />]] as Array<[string, preact.ComponentChildren]>) : []),
            ]}
          />
          {m.status === 'ACTIVE' && can('meters:write') && (
            <>
              {/* Keyed by the meter's last change: a saved edit starts the form from what was stored. */}
              <MeterForm
                key={m.updatedAt}
                initial={formFromMeter(m)}
                editing
                submitLabel="Save changes"
                pending={edit.pending}
                error={edit.error}
                onSubmit={async (state) => {
                  if (await edit.run(m.id, state)) meter.reload();
                }}
              />
              <ConfirmButton
                label="Archive meter"
                title={`Archive ${m.name}?`}
                danger
                onConfirm={async () => {
                  const answer = await archiveMeter(m.id);
                  if (answer.error) return errorMessage(answer.error, answer.response);
                  meter.reload();
                }}
              >
                <p>It can no longer change and leaves the list; its quantities stay readable, and prices that bill it keep billing it.</p>
              </ConfirmButton>
            </>
          )}
        </>
      )}
    </section>
  );
}
