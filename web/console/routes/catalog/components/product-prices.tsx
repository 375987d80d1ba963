/**
 * A product's prices: create (a name such as "Monthly" or "Yearly", amount in the currency's units;
 * a subscription's free trial and one optional usage component — a meter, a price per 1 / 100 /
 * 1,000 / 1,000,000 units, included units), rename, deactivate, and a payment link per price (copy,
 * open, shown at once); x402 paywalls. Each price reads as its label (shared/price-label.ts:
 * `Monthly — €9.00 / month`), so two prices of the product can be told apart.
 */
import { useRef, useState } from 'preact/hooks';
import { ConfirmButton } from '../../../components/confirm';
import { Badge, CopyButton, Empty, ErrorNotice, Loading } from '../../../components/ui';
import { errorMessage } from '../../../shared/api';
import { formatQuantity, formatUnitAmount, parseMoney, usageUnitAmountDecimal } from '../../../shared/format';
import { priceLabels } from '../../../shared/price-label';
import { useAction } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';
import { PricePaywalls } from './price-paywalls';
import { createPaymentLink, createPrice, deactivatePrice, renamePrice, usePrices } from '../use-catalog';
import { useMeters } from '../../meters/use-meters';

const USAGE_PER = [1, 100, 1000, 1_000_000] as const;
type UsagePer = (typeof USAGE_PER)[number];
/** Whole days 1-730 (PriceCreate.trialDays), or undefined. */
const parseTrialDays = (text: string) => (/^\d{1,3}$/.test(text.trim()) && Number(text) >= 1 && Number(text) <= 730 ? Number(text) : undefined);
/** Whole units ≥ 0, or undefined. */
const parseUnits = (text: string) => {
  const cleaned = text.trim().replace(/[\s,_]/g, '');
  return /^\d{1,15}$/.test(cleaned) ? Number(cleaned) : undefined;
};

/** A price's name as typed: trimmed, 1–255 characters (PriceCreate.pricingName); empty means the product's name. */
const parsePriceName = (text: string) => (text.trim().length <= 255 ? text.trim() : undefined);

export function ProductPrices(props: { productId: string; productName?: string }) {
  const { can } = useSession();
  const prices = usePrices(props.productId);
  const [name, setName] = useState('');
  const [amount, setAmount] = useState('');
  const [currency, setCurrency] = useState('USD');
  const [type, setType] = useState<'ONE_TIME' | 'SUBSCRIPTION'>('ONE_TIME');
  const [interval, setInterval] = useState<'DAY' | 'MONTH' | 'YEAR'>('MONTH');
  const [trial, setTrial] = useState('');
  const [meterId, setMeterId] = useState('');
  const [usageAmount, setUsageAmount] = useState('');
  const [usagePer, setUsagePer] = useState<UsagePer>(1000);
  const [included, setIncluded] = useState('');
  const [link, setLink] = useState<string | undefined>();
  const create = useAction(createPrice);
  const meters = useMeters('ACTIVE');
  const meterName = (id: string) => meters.data?.records.find((m) => m.id === id)?.name ?? id;
  const makeLink = useAction(createPaymentLink);
  const crypto = currency === 'USDC' || currency === 'USDT';
  const minor = parseMoney(amount, currency);
  const writable = can('catalog:write');
  const subscription = type === 'SUBSCRIPTION' && !crypto;
  const trialDays = trial.trim() === '' ? null : parseTrialDays(trial);
  const unitAmountDecimal = usageUnitAmountDecimal(usageAmount, currency, usagePer);
  const includedUnits = included.trim() === '' ? 0 : parseUnits(included);
  const usageValid = !subscription || meterId === '' || (unitAmountDecimal !== undefined && includedUnits !== undefined);
  const priceName = parsePriceName(name);
  const valid = minor !== undefined && (!subscription || trialDays !== undefined) && usageValid && priceName !== undefined;
  const labels = priceLabels(prices.data ?? [], { productName: props.productName, meterName });
  return (
    <section aria-labelledby="prices-title">
      <h2 id="prices-title">Prices</h2>
      {link && (
        <div class="secret" role="status">
          <div>
            Payment link:{' '}
            <a href={link} target="_blank" rel="noopener" data-testid="payment-link-url">
              {link}
            </a>
          </div>
          <CopyButton text={link} label="Copy link" />
        </div>
      )}
      <ErrorNotice message={prices.error ?? makeLink.error} retry={prices.reload} />
      {!prices.data && !prices.error && <Loading />}
      {prices.data && prices.data.length === 0 && <Empty>No prices yet.</Empty>}
      {prices.data && prices.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Price</th>
                <th scope="col">Type</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {prices.data.map((p) => (
                <tr key={p.pricingId}>
                  <td>
                    <span data-testid="price-label">{labels.get(p.pricingId)}</span>
                    <div class="mono small">{p.pricingId}</div>
                  </td>
                  <td>
                    {p.pricingType === 'SUBSCRIPTION' ? `every ${p.billingIntervalCount > 1 ? `${p.billingIntervalCount} ` : ''}${String(p.billingInterval).toLowerCase()}` : 'one-time'}
                    {p.trialDays ? <div class="small">{p.trialDays}-day free trial</div> : null}
                    {(p.meteredComponents ?? []).map((c) => (
                      <div class="small" key={c.meterId}>
                        + {meterName(c.meterId)}
                        {c.pricing.model === 'PER_UNIT' && c.pricing.unitAmountDecimal ? ` at ${formatUnitAmount(c.pricing.unitAmountDecimal, p.currency)} a unit` : ` (${c.pricing.model.toLowerCase().replace('_', ' ')})`}
                        {c.includedUnits ? `, ${formatQuantity(String(c.includedUnits))} included` : ''}
                      </div>
                    ))}
                  </td>
                  <td>{p.active ? <Badge tone="good">Active</Badge> : <Badge tone="neutral">Inactive</Badge>}</td>
                  <td>
                    {writable && <RenamePrice price={p} label={labels.get(p.pricingId) ?? p.pricingId} onRenamed={prices.reload} />}{' '}
                    {writable && p.active && (
                      <>
                        <button
                          type="button"
                          onClick={async () => {
                            const created = await makeLink.run(p.pricingId);
                            if (created) setLink(created.paymentLinkUrl);
                          }}
                        >
                          Create payment link<span class="visually-hidden"> for {labels.get(p.pricingId)}</span>
                        </button>{' '}
                        <ConfirmButton
                          label="Deactivate"
                          labelSuffix={labels.get(p.pricingId)}
                          title={`Deactivate ${labels.get(p.pricingId) ?? p.pricingId}?`}
                          danger
                          onConfirm={async () => {
                            const answer = await deactivatePrice(p.pricingId);
                            if (answer.error) return errorMessage(answer.error, answer.response);
                            prices.reload();
                          }}
                        >
                          <p>Checkouts and payment links with this price stop working. Subscriptions already running keep their price.</p>
                        </ConfirmButton>
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {can('x402:settle') && prices.data && <PricePaywalls productId={props.productId} productName={props.productName} prices={prices.data} />}
      {writable && (
        <form
          class="card"
          aria-labelledby="new-price-title"
          onSubmit={async (e) => {
            e.preventDefault();
            if (minor === undefined || !valid) return;
            const created = await create.run(props.productId, {
              ...(priceName ? { pricingName: priceName } : {}),
              amount: minor,
              currency,
              pricingType: crypto ? 'ONE_TIME' : type,
              ...(subscription ? { billingInterval: interval } : {}),
              ...(subscription && trialDays ? { trialDays } : {}),
              ...(subscription && meterId !== '' && unitAmountDecimal !== undefined
                ? { meteredComponents: [{ meterId, includedUnits: includedUnits ?? 0, pricing: { model: 'PER_UNIT' as const, unitAmountDecimal } }] }
                : {}),
              provider: crypto ? 'CRYPTO' : 'STRIPE',
            });
            if (created) {
              setName('');
              setAmount('');
              setTrial('');
              setMeterId('');
              setUsageAmount('');
              setIncluded('');
              prices.reload();
            }
          }}
        >
          <h3 id="new-price-title">New price</h3>
          <div class="toolbar">
            <label>
              Name (optional)
              <input value={name} maxLength={255} placeholder="e.g. Monthly" onInput={(e) => setName(e.currentTarget.value)} aria-describedby="price-name-help" />
            </label>
            <label>
              Amount
              <input inputMode="decimal" required value={amount} onInput={(e) => setAmount(e.currentTarget.value)} aria-invalid={amount !== '' && minor === undefined} />
            </label>
            <label>
              Currency
              <select value={currency} onChange={(e) => setCurrency(e.currentTarget.value)}>
                {['USD', 'EUR', 'GBP', 'USDC', 'USDT'].map((c) => (
                  <option key={c} value={c}>
                    {c}
                  </option>
                ))}
              </select>
            </label>
            <label>
              Type
              <select value={type} onChange={(e) => setType(e.currentTarget.value as typeof type)} disabled={crypto}>
                <option value="ONE_TIME">One-time</option>
                <option value="SUBSCRIPTION">Subscription</option>
              </select>
            </label>
            {type === 'SUBSCRIPTION' && !crypto && (
              <label>
                Every
                <select value={interval} onChange={(e) => setInterval(e.currentTarget.value as typeof interval)}>
                  <option value="DAY">day</option>
                  <option value="MONTH">month</option>
                  <option value="YEAR">year</option>
                </select>
              </label>
            )}
            {subscription && (
              <label>
                Free trial, days (optional)
                <input inputMode="numeric" value={trial} onInput={(e) => setTrial(e.currentTarget.value)} aria-invalid={trialDays === undefined} aria-describedby="price-trial-help" />
              </label>
            )}
          </div>
          <p id="price-name-help" class="muted small">
            What tells this price from the product's others wherever a price is chosen (“Monthly”, “Yearly”, “With tokens”); empty: the product's name. The checkout page shows the product's name.
          </p>
          {subscription && (
            <p id="price-trial-help" class="muted small">
              A free trial (1–730 days) starts the subscription without a charge; the first charge is at the trial's end, and a cancel during the trial charges nothing.
            </p>
          )}
          {subscription && (
            <fieldset>
              <legend>Usage, billed at the end of each period (optional)</legend>
              <label>
                Meter
                <select value={meterId} onChange={(e) => setMeterId(e.currentTarget.value)}>
                  <option value="">No usage</option>
                  {(meters.data?.records ?? []).map((m) => (
                    <option key={m.id} value={m.id}>
                      {m.name}
                    </option>
                  ))}
                </select>
              </label>
              {meterId !== '' && (
                <>
                  <label>
                    Usage price ({currency})
                    <input inputMode="decimal" required placeholder="0.04" value={usageAmount} onInput={(e) => setUsageAmount(e.currentTarget.value)} aria-invalid={usageAmount !== '' && unitAmountDecimal === undefined} />
                  </label>
                  <label>
                    For every
                    <select value={String(usagePer)} onChange={(e) => setUsagePer(Number(e.currentTarget.value) as UsagePer)}>
                      {USAGE_PER.map((n) => (
                        <option key={n} value={String(n)}>
                          {n === 1 ? 'unit' : `${formatQuantity(String(n))} units`}
                        </option>
                      ))}
                    </select>
                  </label>
                  <label>
                    Included units per period
                    <input inputMode="numeric" placeholder="0" value={included} onInput={(e) => setIncluded(e.currentTarget.value)} aria-invalid={includedUnits === undefined} />
                  </label>
                </>
              )}
              {meters.data && meters.data.records.length === 0 && (
                <p class="muted small" style={{ gridColumn: '1 / -1' }}>
                  No meter yet: <a href="/console/meters">create one under Meters</a> to bill usage.
                </p>
              )}
              {meterId !== '' && unitAmountDecimal !== undefined && (
                <p class="muted small" role="status" style={{ gridColumn: '1 / -1' }}>
                  {formatUnitAmount(unitAmountDecimal, currency)} a unit{includedUnits ? `, after ${formatQuantity(String(includedUnits))} included units` : ''}; tiers and packages: the admin API (docs/usage-billing.md).
                </p>
              )}
            </fieldset>
          )}
          <button type="submit" class="primary" disabled={create.pending || !valid}>
            Add price
          </button>
          <ErrorNotice message={create.error} />
        </form>
      )}
    </section>
  );
}

/**
 * Rename a price (the console's updateConsolePrice): the name is the one thing of a price that may
 * change — a label telling it from the product's other prices. A modal dialog with a form (Enter
 * saves, Escape cancels, focus returns to the button).
 */
function RenamePrice(props: { price: { pricingId: string; pricingName: string }; label: string; onRenamed(): void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [name, setName] = useState(props.price.pricingName);
  const rename = useAction(renamePrice);
  const titleId = `rename-${props.price.pricingId}-title`;
  return (
    <>
      <button
        type="button"
        onClick={() => {
          setName(props.price.pricingName);
          rename.clearError();
          dialog.current?.showModal();
        }}
      >
        Rename<span class="visually-hidden"> {props.label}</span>
      </button>
      <dialog ref={dialog} aria-labelledby={titleId}>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            if (!name.trim()) return;
            if (await rename.run(props.price.pricingId, name.trim())) {
              dialog.current?.close();
              props.onRenamed();
            }
          }}
        >
          <h2 id={titleId}>Rename {props.label}</h2>
          <label>
            Name
            <input value={name} required maxLength={255} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={`${titleId}-help`} />
          </label>
          <p id={`${titleId}-help`} class="muted small">
            Only the name changes; what the price charges stays. Checkouts already started and payment links keep the name they were made with.
          </p>
          <ErrorNotice message={rename.error} />
          <div class="actions">
            <button type="button" onClick={() => dialog.current?.close()}>
              Cancel
            </button>{' '}
            <button type="submit" class="primary" disabled={rename.pending || !name.trim()}>
              Save name
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}
