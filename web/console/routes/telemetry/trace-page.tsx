/**
 * One trace: a collapsible span tree beside a waterfall of bars on one time scale (errors marked),
 * virtualised (only the rows in view are rendered, so 5,000 spans stay smooth), and the selected
 * span's attributes, status, events, exceptions and, for a model call, its conversation. The span
 * is in the URL (`?span=`), so every trace and span has its own link.
 */
import { useLocation } from 'preact-iso';
import { useMemo, useState } from 'preact/hooks';
import { Badge, ErrorNotice, Fields, Loading, PageHeader } from '../../components/ui';
import { formatDateTime, formatLlmCost } from '../../shared/format';
import { parseConversation, type Attributes } from './lib/chat';
import { flattenSpanTree } from './lib/span-tree';
import { formatDuration, timeScale } from './lib/time-scale';
import { spanStatus, traceTotals } from './lib/trace-summary';
import { useTrace } from './use-telemetry';

const ROW_HEIGHT = 28;
const VIEW_ROWS = 24;

type Span = {
  span_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: string;
  end_time: string;
  duration_ms: number;
  attributes: Attributes;
  status: { code: string; message?: string };
  events?: Array<{ name: string; time: string | null; attributes: Attributes }>;
};

export function TracePage(props: { projectId: string; traceId: string }) {
  const { query, route, path } = useLocation();
  const trace = useTrace(props.projectId, props.traceId);
  const [collapsed, setCollapsed] = useState<Set<string>>(new Set());
  const [scrollTop, setScrollTop] = useState(0);
  const spans = (trace.data?.spans ?? []) as Span[];
  const rows = useMemo(() => flattenSpanTree(spans, collapsed), [spans, collapsed]);
  const scale = useMemo(() => (trace.data ? timeScale(Date.parse(trace.data.start_time), Date.parse(trace.data.end_time)) : undefined), [trace.data]);
  const selected = spans.find((s) => s.span_id === query.span) ?? spans[0];
  const totals = useMemo(() => traceTotals(spans), [spans]);
  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - 4);
  const visible = rows.slice(first, first + VIEW_ROWS + 8);
  const toggle = (id: string) => {
    const next = new Set(collapsed);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setCollapsed(next);
  };
  const select = (id: string) => route(`${path}?span=${id}`);
  return (
    <>
      <PageHeader title={trace.data ? `Trace ${trace.data.name}` : 'Trace'}>
        <a href={`/console/telemetry/${props.projectId}/traces`}>All traces</a>
      </PageHeader>
      <ErrorNotice message={trace.error} retry={trace.reload} />
      {!trace.data && trace.loading && <Loading />}
      {trace.data && scale && (
        <>
          <Fields
            items={[
              ['Trace id', <span class="mono">{trace.data.trace_id}</span>],
              ['Start', formatDateTime(trace.data.start_time)],
              ['Duration', <span data-field="trace-duration">{formatDuration(trace.data.duration_ms)}</span>],
              ['Spans', <span data-field="span-count">{spans.length}</span>],
              ['Tokens in/out', <span data-field="trace-tokens">{`${totals.tokensInput.toLocaleString('en-US')} / ${totals.tokensOutput.toLocaleString('en-US')}`}</span>],
              ['Cost', <span data-field="trace-cost">{totals.cost === undefined ? 'Not priced' : formatLlmCost(totals.cost)}</span>],
            ]}
          />
          <div class="waterfall-scale" aria-hidden="true" data-testid="waterfall-ticks">
            <span class="waterfall-scale-axis">
              {scale.ticks.map((t) => (
                <span key={t.at} class="waterfall-tick" data-at={t.at} style={{ left: `${t.at * 100}%` }}>
                  {t.label}
                </span>
              ))}
            </span>
          </div>
          <div class="waterfall" role="tree" aria-label="Spans" style={{ height: `${Math.min(rows.length, VIEW_ROWS) * ROW_HEIGHT + 4}px`, overflowY: 'auto', position: 'relative' }} onScroll={(e) => setScrollTop((e.currentTarget as HTMLElement).scrollTop)} tabIndex={0}>
            <div style={{ height: `${rows.length * ROW_HEIGHT}px`, position: 'relative' }}>
              <span class="waterfall-grid" aria-hidden="true">
                {scale.ticks.map((t) => (
                  <span key={t.at} style={{ left: `${t.at * 100}%` }} />
                ))}
              </span>
              {visible.map((row, i) => {
                const s = row.span;
                const bar = scale.bar(Date.parse(s.start_time), Date.parse(s.end_time));
                const error = s.status.code === 'ERROR';
                return (
                  <div
                    key={s.span_id}
                    role="treeitem"
                    aria-level={row.depth + 1}
                    aria-expanded={row.childCount > 0 ? !row.collapsed : undefined}
                    aria-selected={selected?.span_id === s.span_id}
                    data-span-id={s.span_id}
                    class={`waterfall-row${selected?.span_id === s.span_id ? ' selected' : ''}`}
                    style={{ position: 'absolute', top: `${(first + i) * ROW_HEIGHT}px`, height: `${ROW_HEIGHT}px`, left: 0, right: 0, display: 'flex' }}
                  >
                    <span style={{ width: '40%', paddingLeft: `${row.depth * 12}px`, whiteSpace: 'nowrap', overflow: 'hidden', textOverflow: 'ellipsis' }}>
                      {row.childCount === 0 && <span class="tree-toggle-space" />}
                      {row.childCount > 0 && (
                        <button type="button" class="tree-toggle" aria-label={row.collapsed ? `Expand ${s.name}` : `Collapse ${s.name}`} onClick={() => toggle(s.span_id)}>
                          {row.collapsed ? '▸' : '▾'}
                        </button>
                      )}
                      <a href={`${path}?span=${s.span_id}`} onClick={(e) => (e.preventDefault(), select(s.span_id))}>
                        {s.name}
                      </a>
                    </span>
                    <span style={{ width: '60%', position: 'relative' }} aria-hidden="true">
                      <span
                        class={`bar${error ? ' bar-error' : ''}`}
                        title={`${s.name}: ${formatDuration(s.duration_ms)}`}
                        style={{ position: 'absolute', left: `${bar.left * 100}%`, width: `${bar.width * 100}%`, top: '8px', height: '12px', background: error ? '#b3261e' : '#3d6bd9', borderRadius: '2px' }}
                      />
                    </span>
                  </div>
                );
              })}
            </div>
          </div>
          {selected && <SpanDetail span={selected} />}
        </>
      )}
    </>
  );
}

function StatusBadge(props: { code: string; message?: string | undefined }) {
  const status = spanStatus(props.code, props.message);
  return (
    <span title={status.title} data-field="span-status">
      <Badge tone={status.tone}>{status.label}</Badge>
    </span>
  );
}

function SpanDetail(props: { span: Span }) {
  const s = props.span;
  const conversation = parseConversation(s.attributes);
  const exceptions = (s.events ?? []).filter((e) => e.name === 'exception');
  const model = s.attributes['llm.model'];
  return (
    <section class="card" aria-labelledby="span-title">
      <h2 id="span-title">{s.name}</h2>
      <Fields
        items={[
          ['Span id', <span class="mono">{s.span_id}</span>],
          ['Duration', formatDuration(s.duration_ms)],
          ['Status', <StatusBadge code={s.status.code} message={s.status.message} />],
          ...(model !== undefined
            ? ([
                ['Model', String(model)],
                ['Tokens in/out', `${s.attributes['llm.tokens.input'] ?? '—'} / ${s.attributes['llm.tokens.output'] ?? '—'}`],
                ['Cost', s.attributes['llm.cost'] !== undefined ? formatLlmCost(Number(s.attributes['llm.cost'])) : '—'],
              ] as Array<[string, string]>)
            : []),
        ]}
      />
      {conversation.messages.length > 0 && (
        <div class="chat" aria-label="Conversation">
          <h3>Conversation</h3>
          {conversation.messages.map((m, i) => (
            <div key={i} class={`message message-${m.role}`} data-role={m.role}>
              <strong>{m.role}</strong>
              {m.toolCallId && <span class="muted small"> (result of {m.toolCallId})</span>}
              {m.content !== null && <pre class="message-content">{m.content}</pre>}
              {m.toolCalls.map((c, j) => (
                <pre key={j} class="tool-call">{`${c.name}(${c.arguments ?? ''})`}</pre>
              ))}
            </div>
          ))}
        </div>
      )}
      {exceptions.length > 0 && (
        <>
          <h3>Exceptions</h3>
          {exceptions.map((e, i) => (
            <pre key={i} class="exception">{`${String(e.attributes['exception.type'] ?? '')}: ${String(e.attributes['exception.message'] ?? '')}\n${String(e.attributes['exception.stacktrace'] ?? '')}`}</pre>
          ))}
        </>
      )}
      {(s.events ?? []).length > 0 && (
        <>
          <h3>Events</h3>
          <ul>
            {(s.events ?? []).map((e, i) => (
              <li key={i}>
                {e.name} {e.time ? formatDateTime(e.time) : ''}
              </li>
            ))}
          </ul>
        </>
      )}
      <h3>Attributes</h3>
      <Fields items={Object.entries(s.attributes).map(([k, v]) => [k, <span class="mono">{Array.isArray(v) ? JSON.stringify(v) : String(v)}</span>])} />
    </section>
  );
}
