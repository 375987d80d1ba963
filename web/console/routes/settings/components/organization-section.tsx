/**
 * The organization as buyers see it: display name and branding (logo, accent colour) used on the
 * hosted checkout, portal and e-mails; its time zone (the home page's figures); the card
 * processor's state and the receiving wallets.
 */
import { useEffect, useState } from 'preact/hooks';
import { ErrorNotice, Fields, Loading } from '../../../components/ui';
import { consoleApi } from '../../../shared/api';
import { useApi, useAction } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';
import { consoleTimeZone, timeZoneChoices } from '../../../shared/time-zone';
import { formatDateTime } from '../../../shared/format';
import { ReceivingWallets } from './receiving-wallets';
import { cardProcessorFields } from '../card-processor';

const useOrganization = () => useApi(() => consoleApi.GET('/v1/console/organization').then((r) => ({ ...r, data: r.data?.data })), []);
const useCardProcessor = () => useApi(() => consoleApi.GET('/v1/console/card-processor').then((r) => ({ ...r, data: r.data?.data })), []);
const save = (body: { displayName?: string | null; branding?: { logoUrl: string | null; accentColor: string | null }; timeZone?: string }) =>
  consoleApi.PATCH('/v1/console/organization', { body }).then((r) => ({ ...r, data: r.data?.data }));


export function OrganizationSection() {
  const { can } = useSession();
  const organization = useOrganization();
  const processor = useCardProcessor();
  const [displayName, setDisplayName] = useState('');
  const [logoUrl, setLogoUrl] = useState('');
  const [accent, setAccent] = useState('');
  const [saved, setSaved] = useState(false);
  const update = useAction(save);
  const [timeZone, setTimeZone] = useState('UTC');
  const [zoneSaved, setZoneSaved] = useState(false);
  const updateZone = useAction(save);
  useEffect(() => {
    const o = organization.data;
    if (!o) return;
    setDisplayName(o.displayName ?? '');
    setLogoUrl(o.branding.logoUrl ?? '');
    setAccent(o.branding.accentColor ?? '');
    setTimeZone(o.timeZone);
  }, [organization.data]);
  return (
    <section aria-labelledby="organization-title">
      <h2 id="organization-title">Organization</h2>
      <ErrorNotice message={organization.error} retry={organization.reload} />
      {!organization.data && !organization.error && <Loading />}
      {organization.data && (
        <form
          class="card"
          aria-labelledby="branding-title"
          onSubmit={async (e) => {
            e.preventDefault();
            setSaved(false);
            if (await update.run({ displayName: displayName.trim() || null, branding: { logoUrl: logoUrl.trim() || null, accentColor: accent.trim() || null } })) {
              setSaved(true);
              organization.reload();
            }
          }}
        >
          <h3 id="branding-title">What buyers see (checkout, portal, e-mails)</h3>
          <label for="display-name">Display name (empty: {organization.data.name})</label>
          <input id="display-name" maxLength={255} value={displayName} onInput={(e) => setDisplayName(e.currentTarget.value)} disabled={!can('settings:manage')} />
          <label for="logo-url">Logo URL (https)</label>
          <input id="logo-url" type="url" placeholder="https://shop.example.com/logo.png" value={logoUrl} onInput={(e) => setLogoUrl(e.currentTarget.value)} disabled={!can('settings:manage')} />
          <label for="accent">Accent colour (#rrggbb, empty: Kassa's indigo)</label>
          <input id="accent" pattern="^#[0-9a-fA-F]{6}$" placeholder="#4338ca" value={accent} onInput={(e) => setAccent(e.currentTarget.value)} disabled={!can('settings:manage')} />
          <ErrorNotice message={update.error} />
          {saved && (
            <p class="notice success" role="status">
              Saved: the hosted pages show it from now on.
            </p>
          )}
          {can('settings:manage') && (
            <button type="submit" class="primary" disabled={update.pending}>
              Save
            </button>
          )}
        </form>
      )}
      {organization.data && (
        <form
          class="card"
          aria-labelledby="time-zone-title"
          onSubmit={async (e) => {
            e.preventDefault();
            setZoneSaved(false);
            if (await updateZone.run({ timeZone })) {
              setZoneSaved(true);
              organization.reload();
            }
          }}
        >
          <h3 id="time-zone-title">Time zone</h3>
          <p class="muted small" id="time-zone-help">
            The home page counts "today", days and months in this zone.{!can('settings:manage') && ' Only owners and admins can change it.'}
          </p>
          <label for="time-zone">Organization time zone</label>
          <select id="time-zone" aria-describedby="time-zone-help" value={timeZone} onChange={(e) => setTimeZone(e.currentTarget.value)} disabled={!can('settings:manage')}>
            {timeZoneChoices(organization.data.timeZone).map((z) => (
              <option key={z} value={z}>
                {z}
              </option>
            ))}
          </select>
          <ErrorNotice message={updateZone.error} />
          {zoneSaved && (
            <p class="notice success" role="status">
              Saved: the home page shows its figures in {organization.data.timeZone}.
            </p>
          )}
          {can('settings:manage') && (
            <button type="submit" class="primary" disabled={updateZone.pending}>
              Save time zone
            </button>
          )}
        </form>
      )}
      {can('settings:manage') && (
        <>
      <h3>Card processor</h3>
      <ErrorNotice message={processor.error} retry={processor.reload} />
      {processor.data && <div class="card"><Fields items={cardProcessorFields(processor.data, (iso) => formatDateTime(iso, consoleTimeZone()))} /></div>}
      <h3>Receiving wallets</h3>
      <ReceivingWallets />
        </>
      )}
    </section>
  );
}
