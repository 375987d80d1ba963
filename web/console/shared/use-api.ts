/**
 * The data hooks' one building block: runs a typed call, keeps its answer, its error and whether
 * it is loading; `reload()` runs it again. A stale answer (the inputs changed meanwhile) is dropped.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { errorMessage } from './api';

export interface ApiResult<T> {
  data?: T;
  error?: unknown;
  response?: Response;
}

export interface Resource<T> {
  data?: T | undefined;
  error?: string | undefined;
  loading: boolean;
  reload(): void;
}

export function useApi<T>(call: () => Promise<ApiResult<T>>, inputs: unknown[]): Resource<T> {
  const [state, setState] = useState<{ data?: T; error?: string; loading: boolean }>({ loading: true });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setState((previous) => ({ ...previous, loading: true }));
    call().then(
      (result) => {
        if (mine !== generation.current) return;
        if (result.error !== undefined || result.data === undefined) setState({ loading: false, error: errorMessage(result.error, result.response) });
        else setState({ loading: false, data: result.data });
      },
      (err: unknown) => mine === generation.current && setState({ loading: false, error: errorMessage(err) }),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, inputs);
  useEffect(run, [run]);
  return { ...state, reload: run };
}

/** A form's submission: pending while it runs, the error kept (the form keeps its input) until the next try. */
export function useAction<A extends unknown[], T>(action: (...args: A) => Promise<ApiResult<T>>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const run = useCallback(
    async (...args: A): Promise<T | undefined> => {
      setPending(true);
      setError(undefined);
      try {
        const result = await action(...args);
        if (result.error !== undefined || result.data === undefined) {
          setError(errorMessage(result.error, result.response));
          return undefined;
        }
        return result.data;
      } catch (err) {
        setError(errorMessage(err));
        return undefined;
      } finally {
        setPending(false);
      }
    },
    [action],
  );
  return { run, pending, error, clearError: () => setError(undefined) };
}
