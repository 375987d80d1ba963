import { PageHeader } from '../../components/ui';

export function DevelopersPage() {
  return (
    <>
      <PageHeader title="Developers" />
      <p>Coming in this version.</p>
    </>
  );
}
