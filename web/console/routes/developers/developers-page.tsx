/** Developers: API keys, webhook endpoints (and, with the deliveries operations, the delivery log). */
import { useLocation } from 'preact-iso';
import { PageHeader } from '../../components/ui';
import { Tabs } from '../../components/tabs';
import { ApiKeysSection } from './components/api-keys-section';
import { WebhookEndpointsSection } from './components/webhook-endpoints-section';

export const DEVELOPER_TABS = [
  { href: '/console/developers', label: 'API keys' },
  { href: '/console/developers/webhooks', label: 'Webhook endpoints' },
];

export function DevelopersPage() {
  const { path } = useLocation();
  return (
    <>
      <PageHeader title="Developers">
        <a class="button" href="/docs" target="_blank" rel="noopener">
          API reference<span class="visually-hidden"> (opens in a new tab)</span>
        </a>
      </PageHeader>
      <Tabs label="Developers" tabs={DEVELOPER_TABS} />
      {path === '/console/developers/webhooks' ? <WebhookEndpointsSection /> : <ApiKeysSection />}
    </>
  );
}
