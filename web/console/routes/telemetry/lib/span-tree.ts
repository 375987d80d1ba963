/**
 * The trace view's rows: the span tree flattened depth-first for display (a pure function, so the
 * waterfall and the tree render the same rows and a virtualised list can index them).
 *
 * Children are ordered by start time, then span id (the API's order). A span whose parent is not in
 * the trace (not received yet, or sampled out upstream) is shown as a root. Iterative, so a chain of
 * thousands of spans cannot overflow the stack. A cycle in parent links (a broken client) is cut:
 * every span appears exactly once.
 */
export interface TreeSpan {
  span_id: string;
  parent_span_id: string | null;
  start_time: string;
}

export interface SpanRow<S extends TreeSpan> {
  span: S;
  depth: number;
  /** Direct children in the trace (whether or not they are shown). */
  childCount: number;
  collapsed: boolean;
}

const order = (a: TreeSpan, b: TreeSpan) =>
  Date.parse(a.start_time) - Date.parse(b.start_time) || (a.span_id < b.span_id ? -1 : a.span_id > b.span_id ? 1 : 0);

/** Rows in display order; the descendants of a span in `collapsed` are left out. */
export function flattenSpanTree<S extends TreeSpan>(spans: readonly S[], collapsed: ReadonlySet<string> = new Set()): SpanRow<S>[] {
  const byId = new Map(spans.map((s) => [s.span_id, s]));
  const children = new Map<string, S[]>();
  const roots: S[] = [];
  for (const s of spans) {
    const parent = s.parent_span_id;
    if (parent === null || parent === s.span_id || !byId.has(parent)) roots.push(s);
    else {
      let list = children.get(parent);
      if (!list) children.set(parent, (list = []));
      list.push(s);
    }
  }
  for (const list of children.values()) list.sort(order);
  roots.sort(order);
  const rows: SpanRow<S>[] = [];
  const seen = new Set<string>();
  const visit = (start: S[]) => {
    const stack: Array<{ span: S; depth: number }> = [...start].reverse().map((span) => ({ span, depth: 0 }));
    while (stack.length > 0) {
      const { span, depth } = stack.pop()!;
      if (seen.has(span.span_id)) continue;
      seen.add(span.span_id);
      const kids = children.get(span.span_id) ?? [];
      const isCollapsed = collapsed.has(span.span_id) && kids.length > 0;
      rows.push({ span, depth, childCount: kids.length, collapsed: isCollapsed });
      if (isCollapsed) {
        // Hidden, but visited: a collapsed subtree must not resurface as a cycle's root below.
        const hidden = [...kids];
        while (hidden.length > 0) {
          const h = hidden.pop()!;
          if (seen.has(h.span_id)) continue;
          seen.add(h.span_id);
          hidden.push(...(children.get(h.span_id) ?? []));
        }
        continue;
      }
      for (let i = kids.length - 1; i >= 0; i--) stack.push({ span: kids[i]!, depth: depth + 1 });
    }
  };
  visit(roots);
  // Spans only reachable through a cycle: shown as roots, in order.
  const rest = spans.filter((s) => !seen.has(s.span_id)).sort(order);
  for (const s of rest) if (!seen.has(s.span_id)) visit([s]);
  return rows;
}

/** The ids of every span with children: "collapse all". */
export function parentIds(spans: readonly TreeSpan[]): Set<string> {
  const ids = new Set(spans.map((s) => s.span_id));
  return new Set(spans.map((s) => s.parent_span_id).filter((p): p is string => p !== null && ids.has(p)));
}
