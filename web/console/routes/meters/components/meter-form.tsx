/**
 * One form for a meter: create (every field) or edit (name and filter; source, aggregation and
 * property are fixed once made), with the live preview of the definition as it is typed.
 */
import { useState } from 'preact/hooks';
import { ErrorNotice } from '../../../components/ui';
import { definitionOf, type MeterFormState } from '../lib/meter-form';
import { useMeterPreview } from '../use-meters';
import { MeterPreview } from './meter-preview';

const AGGREGATIONS: Array<[MeterFormState['aggregation'], string]> = [
  ['sum', 'Sum of a property'],
  ['count', 'Count'],
  ['max', 'Maximum of a property'],
  ['unique', 'Distinct values of a property'],
  ['last', 'Latest value of a property'],
];

export function MeterForm(props: {
  initial: MeterFormState;
  /** Editing: only the name and the filter change. */
  editing?: boolean;
  submitLabel: string;
  pending: boolean;
  error: string | undefined;
  onSubmit(state: MeterFormState): void;
}) {
  const [state, setState] = useState(props.initial);
  const set = (change: Partial<MeterFormState>) => setState((s) => ({ ...s, ...change }));
  const defined = definitionOf(state);
  const preview = useMeterPreview('definition' in defined ? defined.definition : undefined);
  const fixed = props.editing === true;
  const events = state.source === 'EVENTS';
  const invalid = 'error' in defined ? defined.error : undefined;
  return (
    <form
      class="card"
      aria-labelledby="meter-form-title"
      onSubmit={(e) => {
        e.preventDefault();
        props.onSubmit(state);
      }}
    >
      <h3 id="meter-form-title">{fixed ? 'Edit meter' : 'New meter'}</h3>
      <label for="meter-name">Name</label>
      <input id="meter-name" required maxLength={255} value={state.name} onInput={(e) => set({ name: e.currentTarget.value })} />
      <label for="meter-source">Source</label>
      <select id="meter-source" disabled={fixed} value={state.source} onChange={(e) => set({ source: e.currentTarget.value as MeterFormState['source'] })}>
        <option value="EVENTS">Usage events</option>
        <option value="SPANS">Telemetry spans of a project</option>
      </select>
      {events ? (
        <>
          <label for="meter-event-name">Event name</label>
          <input id="meter-event-name" required maxLength={255} value={state.eventName} onInput={(e) => set({ eventName: e.currentTarget.value })} />
        </>
      ) : (
        <>
          <label for="meter-project">Telemetry project id</label>
          <input id="meter-project" required placeholder="PRJ_…" maxLength={64} value={state.projectId} onInput={(e) => set({ projectId: e.currentTarget.value })} />
          <label for="meter-model">Model (optional)</label>
          <input id="meter-model" maxLength={255} value={state.model} onInput={(e) => set({ model: e.currentTarget.value })} />
          <label for="meter-vendor">Vendor (optional)</label>
          <input id="meter-vendor" maxLength={255} value={state.vendor} onInput={(e) => set({ vendor: e.currentTarget.value })} />
        </>
      )}
      <label for="meter-pairs">{events ? 'Properties to match' : 'Span attributes to match'} (optional, one key=value per line)</label>
      <textarea id="meter-pairs" rows={3} aria-describedby="meter-pairs-help" value={state.pairs} onInput={(e) => set({ pairs: e.currentTarget.value })} />
      <p id="meter-pairs-help" class="muted small">
        Numbers and true/false match as such; quote a value to match it as text ("42").
      </p>
      <label for="meter-aggregation">Aggregation</label>
      <select id="meter-aggregation" disabled={fixed} value={state.aggregation} onChange={(e) => set({ aggregation: e.currentTarget.value as MeterFormState['aggregation'] })}>
        {AGGREGATIONS.map(([value, label]) => (
          <option key={value} value={value}>
            {label}
          </option>
        ))}
      </select>
      {state.aggregation !== 'count' && (
        <>
          <label for="meter-property">{events ? 'Property' : 'Span attribute (or duration_ms, llm.cost)'}</label>
          <input id="meter-property" required disabled={fixed} maxLength={255} value={state.property} onInput={(e) => set({ property: e.currentTarget.value })} />
        </>
      )}
      {!events && (
        <>
          <label for="meter-customer-attribute">Span attribute naming the customer</label>
          <input id="meter-customer-attribute" required disabled={fixed} placeholder="user.id" maxLength={255} value={state.customerAttribute} onInput={(e) => set({ customerAttribute: e.currentTarget.value })} />
        </>
      )}
      {fixed && <p class="muted small">The source, aggregation and property of a meter are fixed; create another meter to change them.</p>}
      <MeterPreview state={preview} hint={invalid ? `No preview yet: ${invalid.charAt(0).toLowerCase()}${invalid.slice(1)}.` : undefined} />
      <ErrorNotice message={props.error} />
      <button type="submit" class="primary" disabled={props.pending}>
        {props.submitLabel}
      </button>
    </form>
  );
}
