import { PageHeader } from '../../components/ui';

export function SettingsPage() {
  return (
    <>
      <PageHeader title="Settings" />
      <p>Coming in this version.</p>
    </>
  );
}
