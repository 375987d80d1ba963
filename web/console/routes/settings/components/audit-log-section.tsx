/** The audit log, newest first, 50 a page (the page number in the URL). */
import { useLocation } from 'preact-iso';
import { ErrorNotice, Loading, Time } from '../../../components/ui';
import { consoleTimeZone } from '../../../shared/time-zone';
import { useAuditLog } from '../use-settings';

export function AuditLogSection() {
  const { query } = useLocation();
  const page = Math.max(1, Number.parseInt(query.page ?? '1', 10) || 1);
  const log = useAuditLog(page);
  const timeZone = consoleTimeZone();
  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit log</h2>
      <ErrorNotice message={log.error} retry={log.reload} />
      {!log.data && !log.error && <Loading />}
      {log.data && (
        <>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Who</th>
                  <th scope="col">What</th>
                  <th scope="col" class="hide-narrow">
                    Details
                  </th>
                </tr>
              </thead>
              <tbody>
                {log.data.records.map((entry) => (
                  <tr key={entry.auditId}>
                    <td>
                      <Time iso={entry.createdAt} timeZone={timeZone} />
                    </td>
                    <td class="small">
                      {entry.actorType}
                      {entry.actorId ? <div class="mono">{entry.actorId}</div> : null}
                    </td>
                    <td>
                      <code>{entry.action}</code>
                      {entry.targetId ? <div class="mono small">{entry.targetId}</div> : null}
                    </td>
                    <td class="hide-narrow small">
                      {entry.summary}
                      {entry.clientAddress ? <div class="muted">from {entry.clientAddress}</div> : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <nav class="pager" aria-label="Pages">
            <span class="muted small">
              Page {log.data.current} of {Math.max(1, log.data.pages)}
            </span>
            <span>
              {page > 1 && (
                <a class="button" href={`/console/settings/audit-log?page=${page - 1}`}>
                  ← Newer
                </a>
              )}{' '}
              {page < log.data.pages && (
                <a class="button" href={`/console/settings/audit-log?page=${page + 1}`}>
                  Older →
                </a>
              )}
            </span>
          </nav>
        </>
      )}
    </section>
  );
}
