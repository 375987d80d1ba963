/** An order's history drawn as a timeline (the entries: order-timeline-entries.ts). */
import { Time } from '../../../components/ui';
import type { TimelineEntry } from './order-timeline-entries';

export { orderTimeline } from './order-timeline-entries';

export function OrderTimeline(props: { entries: TimelineEntry[]; timeZone: string }) {
  return (
    <ol class="timeline">
      {props.entries.map((entry, i) => (
        <li key={i}>
          <strong>{entry.label}</strong>
          <div class="muted small">
            <Time iso={entry.at} timeZone={props.timeZone} />
          </div>
        </li>
      ))}
    </ol>
  );
}
