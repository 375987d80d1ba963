/**
 * A button whose action asks first, in a modal dialog (the browser's <dialog>: focus moves into
 * it, Escape cancels, focus returns). The dialog shows the action's error and stays open.
 */
import type { ComponentChildren } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { ErrorNotice } from './ui';

export function ConfirmButton(props: {
  label: string;
  title: string;
  confirmLabel?: string;
  danger?: boolean;
  /** Said after the label to screen readers only (which member "Remove" removes): the visible label stays one word. */
  labelSuffix?: string;
  children?: ComponentChildren;
  /** Runs on confirmation; an error message keeps the dialog open. */
  onConfirm(): Promise<string | undefined | void>;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const confirm = async () => {
    setPending(true);
    setError(undefined);
    const failure = await props.onConfirm();
    setPending(false);
    if (failure) setError(failure);
    else dialog.current?.close();
  };
  return (
    <>
      <button type="button" class={props.danger ? 'danger' : undefined} onClick={() => dialog.current?.showModal()}>
        {props.label}
        {props.labelSuffix && <span class="visually-hidden"> {props.labelSuffix}</span>}
      </button>
      <dialog ref={dialog} aria-labelledby={`${props.title}-title`.replace(/\W+/g, '-')}>
        <h2 id={`${props.title}-title`.replace(/\W+/g, '-')}>{props.title}</h2>
        {props.children}
        <ErrorNotice message={error} />
        <div class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>{' '}
          <button type="button" class={props.danger ? 'danger' : 'primary'} disabled={pending} onClick={confirm}>
            {pending ? 'Working…' : (props.confirmLabel ?? props.label)}
          </button>
        </div>
      </dialog>
    </>
  );
}
