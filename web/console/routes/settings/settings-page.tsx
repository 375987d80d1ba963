/** Settings: the organization, tax rates, members and invites, the audit log, security (passkeys, the second-factor requirement), your account (sign out everywhere). */
import { useLocation } from 'preact-iso';
import { PageHeader } from '../../components/ui';
import { Tabs } from '../../components/tabs';
import { useSession } from '../../shared/session';
import { AuditLogSection } from './components/audit-log-section';
import { MembersSection } from './components/members-section';
import { SecuritySection } from './components/security-section';
import { OrganizationSection } from './components/organization-section';
import { PasskeysSection, RestrictedBanner } from './components/passkeys-section';
import { TaxSection } from './components/tax-section';

export function SettingsPage() {
  const { path } = useLocation();
  const { can } = useSession();
  const tabs = [
    { href: '/console/settings/organization', label: 'Organization' },
    { href: '/console/settings/tax', label: 'Tax' },
    ...(can('members:manage') ? [{ href: '/console/settings/members', label: 'Members' }] : []),
    ...(can('audit:read') ? [{ href: '/console/settings/audit-log', label: 'Audit log' }] : []),
    { href: '/console/settings/security', label: 'Security' },
    { href: '/console/settings', label: 'Your account' },
  ];
  if (path === '/console/settings/security')
    return (
      <>
        <PageHeader title="Security" />
        <RestrictedBanner />
        <Tabs label="Settings" tabs={tabs} />
        <PasskeysSection />
      </>
    );
  return (
    <>
      <PageHeader title="Settings" />
      <Tabs label="Settings" tabs={tabs} />
      {path === '/console/settings/organization' ? <OrganizationSection /> : path === '/console/settings/tax' ? <TaxSection /> : path === '/console/settings/members' ? <MembersSection /> : path === '/console/settings/audit-log' ? <AuditLogSection /> : <SecuritySection />}
    </>
  );
}
