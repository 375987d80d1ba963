import { PageHeader } from '../../components/ui';

export function AgentsPage() {
  return (
    <>
      <PageHeader title="Agent wallets" />
      <p>Coming in this version.</p>
    </>
  );
}
