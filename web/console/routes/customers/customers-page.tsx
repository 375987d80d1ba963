import { PageHeader } from '../../components/ui';

export function CustomersPage() {
  return (
    <>
      <PageHeader title="Customers" />
      <p>Coming in this version.</p>
    </>
  );
}
