/** Typed data hooks and actions over the meters: the merchant API's (which the session may call) and the console's preview. */
import { useEffect, useState } from 'preact/hooks';
import type { components } from '../../../../generated/merchant';
import type { components as ConsoleComponents } from '../../../../generated/console';
import { consoleApi, errorMessage, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';
import type { MeterDefinition } from './lib/meter-form';

export type Meter = components['schemas']['Meter'];
export type MeterPreview = ConsoleComponents['schemas']['MeterPreviewResponse']['data'];

export const useMeters = (status: 'ACTIVE' | 'ARCHIVED') =>
  useApi(() => merchantApi.GET('/v1/meters', { params: { query: { status } } }).then((r) => ({ ...r, data: r.data?.data })), [status]);
export const useMeter = (id: string) => useApi(() => merchantApi.GET('/v1/meters/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data })), [id]);

export const createMeter = (body: MeterDefinition & { name: string }) => merchantApi.POST('/v1/meters', { body }).then((r) => ({ ...r, data: r.data?.data }));
export const updateMeter = (id: string, body: { name: string; filter: MeterDefinition['filter'] }) =>
  merchantApi.PATCH('/v1/meters/{id}', { params: { path: { id } }, body }).then((r) => ({ ...r, data: r.data?.data }));
export const archiveMeter = (id: string) => merchantApi.POST('/v1/meters/{id}/archive', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));

/** How long the form waits after the last keystroke before asking for a preview. */
export const PREVIEW_DEBOUNCE_MS = 400;

/**
 * The live preview of the definition being typed: asked PREVIEW_DEBOUNCE_MS after it last
 * changed; an answer to an older definition is dropped. Undefined definition: nothing to ask.
 */
export function useMeterPreview(definition: MeterDefinition | undefined) {
  const key = definition ? JSON.stringify(definition) : '';
  const [state, setState] = useState<{ key: string; data?: MeterPreview; error?: string; loading: boolean }>({ key: '', loading: false });
  useEffect(() => {
    if (!definition) {
      setState({ key: '', loading: false });
      return;
    }
    let live = true;
    setState((s) => ({ ...s, key, loading: true }));
    const timer = setTimeout(() => {
      consoleApi.POST('/v1/console/meter-previews', { body: definition }).then(
        (r) => live && setState(r.data ? { key, data: r.data.data, loading: false } : { key, error: errorMessage(r.error, r.response), loading: false }),
        (err: unknown) => live && setState({ key, error: errorMessage(err), loading: false }),
      );
    }, PREVIEW_DEBOUNCE_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  return state;
}
