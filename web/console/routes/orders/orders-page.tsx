import { PageHeader } from '../../components/ui';

export function OrdersPage() {
  return (
    <>
      <PageHeader title="Orders" />
      <p>Coming in this version.</p>
    </>
  );
}
