/** Developers: API keys, webhook endpoints (with test events), the delivery log, the webhook signing keys. */
import { useLocation } from 'preact-iso';
import { PageHeader } from '../../components/ui';
import { Tabs } from '../../components/tabs';
import { ApiKeysSection } from './components/api-keys-section';
import { WebhookEndpointsSection } from './components/webhook-endpoints-section';
import { SigningKeysSection } from './components/signing-keys-section';
import { DeliveriesSection, DeliverySection } from './components/deliveries-section';

export const DEVELOPER_TABS = [
  { href: '/console/developers', label: 'API keys' },
  { href: '/console/developers/webhooks', label: 'Webhook endpoints' },
  { href: '/console/developers/deliveries', label: 'Deliveries' },
  { href: '/console/developers/signing-keys', label: 'Signing keys' },
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
      {path === '/console/developers/webhooks' ? (
        <WebhookEndpointsSection />
      ) : path === '/console/developers/signing-keys' ? (
        <SigningKeysSection />
      ) : path === '/console/developers/deliveries' ? (
        <DeliveriesSection />
      ) : path.startsWith('/console/developers/deliveries/') ? (
        <DeliverySection id={decodeURIComponent(path.slice('/console/developers/deliveries/'.length))} />
      ) : (
        <ApiKeysSection />
      )}
    </>
  );
}
