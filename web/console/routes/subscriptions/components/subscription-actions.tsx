/** Cancel at period end or now, pause, resume: each asked in a dialog (`subscriptions:manage`). */
import { ConfirmButton } from '../../../components/confirm';
import { consoleApi, errorMessage } from '../../../shared/api';
import type { Subscription } from '../use-subscriptions';

export function SubscriptionActions(props: { subscription: Subscription; onChanged(): void }) {
  const s = props.subscription;
  const path = { params: { path: { id: s.subscriptionId } } };
  const done = async (answer: { error?: unknown; response: Response }) => {
    if (answer.error) return errorMessage(answer.error, answer.response);
    props.onChanged();
  };
  const live = s.status === 'ACTIVE' || s.status === 'PAUSED';
  if (!live) return null;
  return (
    <div class="card">
      <h2>Manage</h2>
      <div class="actions" style={{ display: 'flex', gap: '8px', flexWrap: 'wrap' }}>
        {s.status === 'ACTIVE' && !s.cancelAtPeriodEnd && (
          <ConfirmButton label="Cancel at period end" title="Cancel at the end of the period?" onConfirm={async () => done(await consoleApi.POST('/v1/console/subscriptions/{id}/cancel', { ...path, body: { atPeriodEnd: true } }))}>
            <p>The customer keeps access until the current period ends; nothing more is charged.</p>
          </ConfirmButton>
        )}
        <ConfirmButton label="Cancel now" title="Cancel the subscription now?" danger onConfirm={async () => done(await consoleApi.POST('/v1/console/subscriptions/{id}/cancel', { ...path, body: { atPeriodEnd: false } }))}>
          <p>Access ends at once and nothing more is charged. This cannot be undone.</p>
        </ConfirmButton>
        {s.status === 'ACTIVE' && (
          <ConfirmButton label="Pause" title="Pause the subscription?" onConfirm={async () => done(await consoleApi.POST('/v1/console/subscriptions/{id}/pause', path))}>
            <p>No renewal is charged while it is paused.</p>
          </ConfirmButton>
        )}
        {s.status === 'PAUSED' && (
          <ConfirmButton label="Resume" title="Resume the subscription?" onConfirm={async () => done(await consoleApi.POST('/v1/console/subscriptions/{id}/resume', path))}>
            <p>Renewals are charged again from the next period.</p>
          </ConfirmButton>
        )}
      </div>
    </div>
  );
}
