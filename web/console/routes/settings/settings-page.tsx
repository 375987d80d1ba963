/** Settings: members and invites, the audit log, your account (sign out everywhere). */
import { useLocation } from 'preact-iso';
import { PageHeader } from '../../components/ui';
import { Tabs } from '../../components/tabs';
import { useSession } from '../../shared/session';
import { AuditLogSection } from './components/audit-log-section';
import { MembersSection } from './components/members-section';
import { SecuritySection } from './components/security-section';

export function SettingsPage() {
  const { path } = useLocation();
  const { can } = useSession();
  const tabs = [
    ...(can('members:manage') ? [{ href: '/console/settings/members', label: 'Members' }] : []),
    ...(can('audit:read') ? [{ href: '/console/settings/audit-log', label: 'Audit log' }] : []),
    { href: '/console/settings', label: 'Your account' },
  ];
  return (
    <>
      <PageHeader title="Settings" />
      <Tabs label="Settings" tabs={tabs} />
      {path === '/console/settings/members' ? <MembersSection /> : path === '/console/settings/audit-log' ? <AuditLogSection /> : <SecuritySection />}
    </>
  );
}
