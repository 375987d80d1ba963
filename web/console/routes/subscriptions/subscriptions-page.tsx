import { PageHeader } from '../../components/ui';

export function SubscriptionsPage() {
  return (
    <>
      <PageHeader title="Subscriptions" />
      <p>Coming in this version.</p>
    </>
  );
}
