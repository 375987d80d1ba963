/**
 * One small form per row (a wallet per chain, a paywall per price): what each row's input holds
 * until it is saved, its error, whether it is being sent, and which row was saved last. Updates
 * are functional, so two rows answering out of order never overwrite each other's error.
 */
import { useState } from 'preact/hooks';
import { errorMessage } from './api';
import type { ApiResult } from './use-api';

export interface KeyedForms<K extends string | number> {
  /** What the row's input shows: what was typed, else what is stored. */
  value(key: K, stored: string): string;
  error(key: K): string | undefined;
  pending(key: K): boolean;
  saved(key: K): boolean;
  input(key: K, text: string): void;
  /** Drops what was typed, so the input shows what is stored again. */
  forget(key: K): void;
  /** Sends the row; true when the server accepted it. A refusal is kept as the row's error, and what was typed stays. */
  submit(key: K, send: () => Promise<ApiResult<unknown>>): Promise<boolean>;
}

export function useKeyedForms<K extends string | number>(): KeyedForms<K> {
  const [inputs, setInputs] = useState<Partial<Record<K, string>>>({});
  const [errors, setErrors] = useState<Partial<Record<K, string>>>({});
  const [pending, setPending] = useState<K | undefined>();
  const [saved, setSaved] = useState<K | undefined>();
  const setError = (key: K, message: string | undefined) => setErrors((previous) => ({ ...previous, [key]: message }));
  const forget = (key: K) =>
    setInputs((previous) => {
      const { [key]: _, ...rest } = previous;
      return rest as Partial<Record<K, string>>;
    });
  return {
    value: (key, stored) => inputs[key] ?? stored,
    error: (key) => errors[key],
    pending: (key) => pending === key,
    saved: (key) => saved === key,
    input: (key, text) => setInputs((previous) => ({ ...previous, [key]: text })),
    forget,
    async submit(key, send) {
      setPending(key);
      setSaved(undefined);
      const answer = await send().catch((err: unknown): ApiResult<unknown> => ({ error: err }));
      setPending(undefined);
      if (answer.error !== undefined || answer.data === undefined) {
        setError(key, errorMessage(answer.error, answer.response));
        return false;
      }
      setError(key, undefined);
      setSaved(key);
      return true;
    },
  };
}
