/**
 * Settings → Tax (issue 39): the organization's tax rates (list from the merchant API's
 * listTaxRates, create and archive with the console's operations, `catalog:write`) and its own
 * country (EU reverse charge; `settings:manage`). Only the generated clients of the contract.
 */
import { useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, Empty, ErrorNotice, Loading } from '../../../components/ui';
import { consoleApi, errorMessage, merchantApi } from '../../../shared/api';
import { useSession } from '../../../shared/session';
import { useApi } from '../../../shared/use-api';

const useTaxRates = (status: 'ACTIVE' | 'ARCHIVED') => useApi(() => merchantApi.GET('/v1/tax-rates', { params: { query: { status } } }).then((r) => ({ ...r, data: r.data?.data.records })), [status]);
const useTaxSettings = () => useApi(() => consoleApi.GET('/v1/console/tax-settings').then((r) => ({ ...r, data: r.data?.data })), []);

export function TaxSection() {
  const { can } = useSession();
  const writable = can('catalog:write');
  const [status, setStatus] = useState<'ACTIVE' | 'ARCHIVED'>('ACTIVE');
  const rates = useTaxRates(status);
  const settings = useTaxSettings();
  const [form, setForm] = useState({ displayName: 'VAT', percentage: '', country: '', region: '', inclusive: false });
  const [createError, setCreateError] = useState<string | undefined>();
  const [created, setCreated] = useState<string | undefined>();
  const [country, setCountry] = useState<string | undefined>();
  const [countryError, setCountryError] = useState<string | undefined>();
  const [countrySaved, setCountrySaved] = useState(false);

  return (
    <section aria-labelledby="tax-title">
      <h2 id="tax-title">Tax</h2>
      <p class="muted small">
        Rates apply by the buyer's country (and region). The buyer's country is asked on the checkout page, or given with the checkout session. Exclusive rates are added on top; inclusive rates are already in your prices.
      </p>

      <form
        class="card"
        aria-labelledby="tax-country-title"
        onSubmit={async (e) => {
          e.preventDefault();
          setCountryError(undefined);
          setCountrySaved(false);
          const value = (country ?? settings.data?.merchantCountry ?? '').trim();
          const answer = await consoleApi.PUT('/v1/console/tax-settings', { body: { merchantCountry: value === '' ? null : value.toUpperCase() } });
          if (answer.error) return setCountryError(errorMessage(answer.error, answer.response));
          setCountrySaved(true);
          settings.reload();
        }}
      >
        <h3 id="tax-country-title">Your country</h3>
        <p class="muted small" id="tax-country-help">
          For EU reverse charge: a buyer with a valid-looking VAT number of another EU country pays no VAT. No VAT registry (VIES) is consulted.
        </p>
        {settings.data === undefined && !settings.error && <Loading />}
        <ErrorNotice message={settings.error} retry={settings.reload} />
        <div class="inline-form">
          <label for="tax-merchant-country">Country code</label>
          <input
            id="tax-merchant-country"
            maxLength={2}
            placeholder="DE"
            autoComplete="off"
            value={country ?? settings.data?.merchantCountry ?? ''}
            disabled={!can('settings:manage')}
            aria-describedby={countryError ? 'tax-country-error' : 'tax-country-help'}
            aria-invalid={countryError ? true : undefined}
            onInput={(e) => setCountry(e.currentTarget.value)}
          />
          {can('settings:manage') && (
            <button type="submit" class="primary">
              Save country
            </button>
          )}
        </div>
        {countryError && (
          <p id="tax-country-error" class="field-error" role="alert">
            {countryError}
          </p>
        )}
        {countrySaved && !countryError && (
          <p role="status" class="small">
            Country saved.
          </p>
        )}
      </form>

      <div class="toolbar" role="group" aria-label="Which tax rates">
        <button type="button" aria-pressed={status === 'ACTIVE'} onClick={() => setStatus('ACTIVE')}>
          Active
        </button>
        <button type="button" aria-pressed={status === 'ARCHIVED'} onClick={() => setStatus('ARCHIVED')}>
          Archived
        </button>
      </div>
      <ErrorNotice message={rates.error} retry={rates.reload} />
      {!rates.data && !rates.error && <Loading />}
      {rates.data && rates.data.length === 0 && <Empty>{status === 'ACTIVE' ? 'No tax rates yet: checkouts are not taxed.' : 'No archived tax rates.'}</Empty>}
      {rates.data && rates.data.length > 0 && (
        <div class="table-wrap">
          <table aria-label={status === 'ACTIVE' ? 'Active tax rates' : 'Archived tax rates'}>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Rate</th>
                <th scope="col">Where</th>
                <th scope="col">Applied</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {rates.data.map((r) => (
                <tr key={r.id}>
                  <td>
                    {r.displayName}
                    <div class="mono small">{r.id}</div>
                  </td>
                  <td>{r.percentage}%</td>
                  <td>
                    {r.country}
                    {r.region ? `-${r.region}` : ''}
                  </td>
                  <td>{r.inclusive ? <Badge tone="neutral">Included in price</Badge> : <Badge tone="good">Added on top</Badge>}</td>
                  <td>
                    {writable && r.status === 'ACTIVE' && (
                      <ConfirmButton
                        label={`Archive ${r.displayName} ${r.percentage}% (${r.country}${r.region ? `-${r.region}` : ''})`}
                        title="Archive this tax rate?"
                        danger
                        onConfirm={async () => {
                          const answer = await consoleApi.POST('/v1/console/tax-rates/{id}/archive', { params: { path: { id: r.id } } });
                          if (answer.error) return errorMessage(answer.error, answer.response);
                          rates.reload();
                        }}
                      >
                        <p>New checkouts stop applying it. Orders and subscriptions that already have it keep it.</p>
                      </ConfirmButton>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      {writable && (
        <form
          class="card"
          aria-labelledby="new-tax-rate-title"
          onSubmit={async (e) => {
            e.preventDefault();
            setCreateError(undefined);
            setCreated(undefined);
            const answer = await consoleApi.POST('/v1/console/tax-rates', {
              body: { displayName: form.displayName, percentage: form.percentage.trim(), country: form.country.trim(), region: form.region.trim() || null, inclusive: form.inclusive },
            });
            if (answer.error) return setCreateError(errorMessage(answer.error, answer.response));
            setCreated(`${answer.data.data.displayName} ${answer.data.data.percentage}% created.`);
            setForm({ ...form, percentage: '', region: '' });
            setStatus('ACTIVE');
            rates.reload();
          }}
        >
          <h3 id="new-tax-rate-title">New tax rate</h3>
          <div class="toolbar">
            <label>
              Name
              <input required maxLength={50} value={form.displayName} onInput={(e) => setForm({ ...form, displayName: e.currentTarget.value })} />
            </label>
            <label>
              Percent
              <input required inputMode="decimal" placeholder="19" value={form.percentage} onInput={(e) => setForm({ ...form, percentage: e.currentTarget.value })} />
            </label>
            <label>
              Country code
              <input required maxLength={2} placeholder="DE" value={form.country} onInput={(e) => setForm({ ...form, country: e.currentTarget.value })} />
            </label>
            <label>
              Region (optional)
              <input maxLength={6} placeholder="CA" value={form.region} onInput={(e) => setForm({ ...form, region: e.currentTarget.value })} />
            </label>
            <label>
              Applied
              <select value={form.inclusive ? 'inclusive' : 'exclusive'} onChange={(e) => setForm({ ...form, inclusive: e.currentTarget.value === 'inclusive' })}>
                <option value="exclusive">Added on top</option>
                <option value="inclusive">Included in price</option>
              </select>
            </label>
            <button type="submit" class="primary">
              Add tax rate
            </button>
          </div>
          {createError && (
            <p class="field-error" role="alert">
              {createError}
            </p>
          )}
          {created && !createError && (
            <p role="status" class="small">
              {created}
            </p>
          )}
        </form>
      )}
    </section>
  );
}
