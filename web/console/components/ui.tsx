/** Small UI primitives shared by the pages: one component per concept. */
import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';
import { formatDateTime, formatMoney } from '../shared/format';

/** The page's heading, which also names the document (the browser tab, the history). */
export function PageHeader(props: { title: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${props.title} · Kassa`;
  }, [props.title]);
  return (
    <div class="page-header">
      <h1>{props.title}</h1>
      {props.children && <div class="actions">{props.children}</div>}
    </div>
  );
}

export function Money(props: { minor: number; currency: string }) {
  return <span class="money">{formatMoney(props.minor, props.currency)}</span>;
}

export function Time(props: { iso: string | null | undefined; timeZone?: string }) {
  return props.iso ? <time dateTime={props.iso}>{formatDateTime(props.iso, props.timeZone)}</time> : <span>—</span>;
}

/** An error that says what went wrong and what to do; `retry` offers to run the request again. */
export function ErrorNotice(props: { message: string | undefined; retry?: () => void }) {
  if (!props.message) return null;
  return (
    <div class="notice error" role="alert">
      <p>{props.message}</p>
      {props.retry && (
        <button type="button" onClick={props.retry}>
          Try again
        </button>
      )}
    </div>
  );
}

export function Loading(props: { label?: string }) {
  return (
    <p class="muted" role="status">
      {props.label ?? 'Loading…'}
    </p>
  );
}

export function Badge(props: { tone?: 'good' | 'bad' | 'warn' | 'neutral'; children: ComponentChildren }) {
  return <span class={`badge ${props.tone ?? 'neutral'}`}>{props.children}</span>;
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty">{props.children}</p>;
}

/** A labelled definition list of an object's fields. */
export function Fields(props: { items: Array<[string, ComponentChildren]> }) {
  return (
    <dl class="fields">
      {props.items.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd>{value ?? '—'}</dd>
        </div>
      ))}
    </dl>
  );
}

export function CopyButton(props: { text: string; label?: string }) {
  return (
    <button
      type="button"
      onClick={(event) => {
        const button = event.currentTarget;
        navigator.clipboard?.writeText(props.text).then(
          () => (button.textContent = 'Copied'),
          () => (button.textContent = 'Copy failed: select the text'),
        );
      }}
    >
      {props.label ?? 'Copy'}
    </button>
  );
}

/** An e-mail address that wraps only before its `@` and after the dots of its domain, never mid-word. */
export function EmailAddress(props: { email: string }) {
  const at = props.email.lastIndexOf('@');
  if (at <= 0) return <>{props.email}</>;
  const domain = props.email.slice(at + 1).split('.');
  return (
    <span class="email">
      {props.email
        .slice(0, at)
        .split('.')
        .map((part, i) => (i === 0 ? part : [<span key={`l${i}`}>.</span>, <wbr key={`lw${i}`} />, part]))}
      <wbr />@
      {domain.map((part, i) => (i === 0 ? part : [<span key={i}>.</span>, <wbr key={`w${i}`} />, part]))}
    </span>
  );
}
