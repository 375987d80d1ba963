/**
 * Keyset paging of a list (the API's `starting_after` / `ending_before` cursors): older and newer
 * pages are links carrying the list's filters, so every page has its URL and costs the same at
 * any depth.
 */
import { filtersToQuery } from '../shared/format';

export function Pager(props: {
  path: string;
  filters: Record<string, string | undefined>;
  page: { nextCursor: string | null; previousCursor: string | null; hasMore: boolean; total: number; totalExact: boolean };
  cursor: { starting_after?: string; ending_before?: string };
}) {
  const { page, cursor } = props;
  const base = { ...props.filters, starting_after: undefined, ending_before: undefined };
  // The API names a cursor only when records lie beyond it (older after nextCursor, newer before previousCursor).
  const older = page.nextCursor;
  const newer = page.previousCursor;
  return (
    <nav class="pager" aria-label="Pages">
      <span class="muted small">
        {page.totalExact ? page.total : `about ${page.total}`} {page.total === 1 ? 'record' : 'records'}
        {cursor.starting_after || cursor.ending_before ? ' from here' : ''}
      </span>
      <span>
        {newer ? (
          <a class="button" href={`${props.path}${filtersToQuery({ ...base, ending_before: newer })}`}>
            ← Newer
          </a>
        ) : null}{' '}
        {older ? (
          <a class="button" href={`${props.path}${filtersToQuery({ ...base, starting_after: older })}`}>
            Older →
          </a>
        ) : null}
      </span>
    </nav>
  );
}
