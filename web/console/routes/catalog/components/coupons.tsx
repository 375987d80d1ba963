/**
 * Catalog → Coupons (issue 39): the organization's coupons with their promotion codes, their limits
 * (redemptions used of the limit, expiry, products) and how often each was redeemed, a form for a
 * new coupon and one for a code of a coupon. Only the merchant API's operations (`listCoupons`,
 * `listPromotionCodes`, `createCoupon`, `createPromotionCode`, `listProducts`), which a console
 * session may call with its role's permissions. Times are shown and typed in the member's own
 * time zone (the browser's) and sent as ISO instants in UTC (shared/local-time.ts).
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { components } from '../../../../../generated/merchant';
import { Badge, Empty, ErrorNotice, Loading, Money, Time } from '../../../components/ui';
import { merchantApi } from '../../../shared/api';
import { parseMoney } from '../../../shared/format';
import { expiryProblem, localInputToIso } from '../../../shared/local-time';
import { consoleTimeZone } from '../../../shared/time-zone';
import { hasExpired, parseRedemptionLimit, redemptionsText } from '../lib/discount-fields';
import { useAction, useApi } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';

type Coupon = components['schemas']['Coupon'];
type PromotionCode = components['schemas']['PromotionCode'];
type Product = { id: string; name: string };

const useCoupons = () => useApi(() => merchantApi.GET('/v1/coupons').then((r) => ({ ...r, data: r.data?.data })), []);
const usePromotionCodes = () => useApi(() => merchantApi.GET('/v1/promotion-codes', { params: { query: {} } }).then((r) => ({ ...r, data: r.data?.data })), []);
/** The published products a coupon may be limited to: the 100 newest (the API takes any product id). */
const useProducts = () =>
  useApi(() => merchantApi.GET('/v1/product', { params: { query: { size: 100 } } }).then((r) => ({ ...r, data: r.data?.data.records.map((p): Product => ({ id: p.id, name: p.name })) })), []);
const createCoupon = (body: components['schemas']['CouponCreate']) => merchantApi.POST('/v1/coupons', { body }).then((r) => ({ ...r, data: r.data?.data }));
const createPromotionCode = (body: components['schemas']['PromotionCodeCreate']) => merchantApi.POST('/v1/promotion-codes', { body }).then((r) => ({ ...r, data: r.data?.data }));

function terms(c: Coupon) {
  return c.percentOff !== null ? <>{c.percentOff}% off</> : <><Money minor={c.amountOff!} currency={c.currency!} /> off</>;
}
const durationText = (c: Coupon) => (c.duration === 'ONCE' ? 'once' : c.duration === 'FOREVER' ? 'forever' : `${c.durationInPeriods} billing periods`);

/** A field's problem under it, named by the field's aria-describedby. */
function FieldError(props: { id: string; message: string | undefined }) {
  return props.message ? (
    <p id={props.id} class="field-error">
      {props.message}
    </p>
  ) : null;
}
const describedBy = (...ids: Array<string | false | undefined>) => ids.filter(Boolean).join(' ') || undefined;

/** A labelled input checked before sending: its hint and its problem under it, both named by aria-describedby. */
function CheckedField(props: {
  id: string;
  label: ComponentChildren;
  value: string;
  error: string | undefined;
  hint?: ComponentChildren;
  type?: 'datetime-local';
  inputMode?: 'decimal' | 'numeric';
  required?: boolean;
  onValue: (value: string) => void;
}) {
  const hintId = props.hint ? `${props.id}-help` : undefined;
  const errorId = `${props.id}-error`;
  const common = {
    id: props.id,
    required: props.required,
    value: props.value,
    'aria-invalid': props.error ? true : undefined,
    'aria-describedby': describedBy(hintId, props.error && errorId),
    onInput: (e: { currentTarget: HTMLInputElement }) => props.onValue(e.currentTarget.value),
  };
  return (
    <>
      <label for={props.id}>{props.label}</label>
      {props.type === 'datetime-local' ? <input type="datetime-local" {...common} /> : <input inputMode={props.inputMode} {...common} />}
      {props.hint && (
        <p id={hintId} class="muted small">
          {props.hint}
        </p>
      )}
      <FieldError id={errorId} message={props.error} />
    </>
  );
}

export function CouponsSection() {
  const { can } = useSession();
  const coupons = useCoupons();
  const codes = usePromotionCodes();
  const products = useProducts();
  const timeZone = consoleTimeZone();
  const now = new Date();
  const codesOf = (id: string): PromotionCode[] => codes.data?.records.filter((p) => p.couponId === id) ?? [];
  const productName = (id: string) => products.data?.find((p) => p.id === id)?.name ?? id;
  return (
    <section aria-labelledby="coupons-title">
      <h2 id="coupons-title">Coupons</h2>
      <ErrorNotice message={coupons.error ?? codes.error} retry={() => (coupons.reload(), codes.reload())} />
      {!coupons.data && !coupons.error && <Loading />}
      {coupons.data && coupons.data.records.length === 0 && <Empty>No coupons yet.</Empty>}
      {coupons.data && coupons.data.records.length > 0 && (
        <>
          <p class="muted small">Times are in your time zone ({timeZone}).</p>
          <div class="table-wrap" style={{ marginBottom: '16px' }}>
            <table data-testid="coupons">
              <thead>
                <tr>
                  <th scope="col">Coupon</th>
                  <th scope="col">Discount</th>
                  <th scope="col" class="num">Redeemed</th>
                  <th scope="col">Promotion codes</th>
                </tr>
              </thead>
              <tbody>
                {coupons.data.records.map((c) => (
                  <tr key={c.id}>
                    <td>
                      {c.name} {c.valid ? <Badge tone="good">Valid</Badge> : <Badge tone="neutral">Ended</Badge>}
                      <div class="mono small">{c.id}</div>
                      <div class="muted small" data-testid="coupon-expiry">
                        {c.redeemBy ? (
                          <>
                            {hasExpired(c.redeemBy, now) ? 'Expired' : 'Expires'} <Time iso={c.redeemBy} timeZone={timeZone} />
                          </>
                        ) : (
                          'No expiry'
                        )}
                      </div>
                    </td>
                    <td>
                      {terms(c)}, {durationText(c)}
                      <div class="muted small" data-testid="coupon-products">
                        {c.productIds ? `Only ${c.productIds.map(productName).join(', ')}` : 'All products'}
                      </div>
                    </td>
                    <td class="num" data-testid="coupon-redemptions">
                      {redemptionsText(c.timesRedeemed, c.maxRedemptions)}
                    </td>
                    <td>
                      {codesOf(c.id).length === 0 ? (
                        <span class="muted">None</span>
                      ) : (
                        <ul class="plain">
                          {codesOf(c.id).map((p) => (
                            <li key={p.id} data-testid="promotion-code">
                              <code>{p.code}</code> · {redemptionsText(p.timesRedeemed, p.maxRedemptions)} redeemed
                              {p.firstTimeTransaction && ' · first order only'}
                              {p.oncePerCustomer && ' · once per customer'}
                              {p.expiresAt && (
                                <>
                                  {' · '}
                                  {hasExpired(p.expiresAt, now) ? 'expired' : 'expires'} <Time iso={p.expiresAt} timeZone={timeZone} />
                                </>
                              )}
                              {!p.active && ' · inactive'}
                            </li>
                          ))}
                        </ul>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {can('checkout:write') && <NewCoupon products={products.data} productsError={products.error} timeZone={timeZone} onCreated={coupons.reload} />}
      {can('checkout:write') && coupons.data && coupons.data.records.length > 0 && <NewPromotionCode coupons={coupons.data.records} timeZone={timeZone} onCreated={codes.reload} />}
    </section>
  );
}

type CouponErrors = Partial<Record<'value' | 'max' | 'redeemBy' | 'products', string>>;

function NewCoupon(props: { products: Product[] | undefined; productsError: string | undefined; timeZone: string; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [kind, setKind] = useState<'percent' | 'amount'>('percent');
  const [value, setValue] = useState('');
  const [currency, setCurrency] = useState('USD');
  const [duration, setDuration] = useState<Coupon['duration']>('ONCE');
  const [periods, setPeriods] = useState('3');
  const [max, setMax] = useState('');
  const [redeemBy, setRedeemBy] = useState('');
  const [scope, setScope] = useState<'all' | 'some'>('all');
  const [chosen, setChosen] = useState<string[]>([]);
  const [errors, setErrors] = useState<CouponErrors>({});
  const create = useAction(createCoupon);
  const clear = (field: keyof CouponErrors) => errors[field] && setErrors({ ...errors, [field]: undefined });
  return (
    <form
      class="card"
      aria-labelledby="new-coupon-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const found: CouponErrors = {};
        const code = currency.trim().toUpperCase();
        const amount = kind === 'amount' ? parseMoney(value, /^[A-Z]{3,4}$/.test(code) ? code : 'USD') : undefined;
        if (kind === 'percent' && !/^(100(\.0{1,2})?|[1-9]?[0-9](\.[0-9]{1,2})?)$/.test(value.trim())) found.value = 'Enter a percent from 0.01 to 100, with at most 2 decimals (e.g. 20 or 12.5).';
        else if (kind === 'percent' && Number(value) === 0) found.value = 'Enter a percent from 0.01 to 100.';
        if (kind === 'amount' && amount === undefined) found.value = `Enter an amount in ${code || 'the currency'} greater than zero (e.g. 5.00).`;
        const limit = parseRedemptionLimit(max);
        if ('problem' in limit) found.max = limit.problem;
        const expiry = expiryProblem(redeemBy, new Date(), props.timeZone);
        if (expiry) found.redeemBy = expiry;
        if (scope === 'some' && chosen.length === 0) found.products = 'Tick at least one product, or choose "All products".';
        setErrors(found);
        const first = (['value', 'max', 'redeemBy', 'products'] as const).find((k) => found[k]);
        if (first) {
          document.getElementById(first === 'value' ? 'coupon-value' : first === 'max' ? 'coupon-max' : first === 'redeemBy' ? 'coupon-redeem-by' : 'coupon-scope-some')?.focus();
          return;
        }
        const off = kind === 'percent' ? { percentOff: value.trim() } : { amountOff: amount!, currency: code };
        const created = await create.run({
          name,
          duration,
          ...off,
          ...(duration === 'REPEATING' ? { durationInPeriods: Number(periods) } : {}),
          ...('limit' in limit && limit.limit !== undefined ? { maxRedemptions: limit.limit } : {}),
          ...(redeemBy.trim() ? { redeemBy: localInputToIso(redeemBy, props.timeZone)! } : {}),
          ...(scope === 'some' ? { productIds: chosen } : {}),
        });
        if (created) {
          setName('');
          setValue('');
          setMax('');
          setRedeemBy('');
          setScope('all');
          setChosen([]);
          props.onCreated();
        }
      }}
    >
      <h3 id="new-coupon-title">New coupon</h3>
      <label for="coupon-name">Name</label>
      <input id="coupon-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <label for="coupon-kind">Discount</label>
      <select id="coupon-kind" value={kind} onChange={(e) => (setKind(e.currentTarget.value as 'percent' | 'amount'), clear('value'))}>
        <option value="percent">Percent off</option>
        <option value="amount">Amount off</option>
      </select>
      <CheckedField
        id="coupon-value"
        label={kind === 'percent' ? 'Percent (0.01–100)' : 'Amount (e.g. 5.00)'}
        required
        inputMode="decimal"
        value={value}
        error={errors.value}
        onValue={(v) => (setValue(v), clear('value'))}
      />
      {kind === 'amount' && (
        <>
          <label for="coupon-currency">Currency</label>
          <input id="coupon-currency" required maxLength={3} value={currency} aria-describedby="coupon-currency-help" onInput={(e) => setCurrency(e.currentTarget.value)} />
          <p id="coupon-currency-help" class="muted small">
            An amount off applies only to prices in this currency.
          </p>
        </>
      )}
      <label for="coupon-duration">On subscriptions</label>
      <select id="coupon-duration" value={duration} aria-describedby="coupon-duration-help" onChange={(e) => setDuration(e.currentTarget.value as Coupon['duration'])}>
        <option value="ONCE">First charged period</option>
        <option value="REPEATING">Several billing periods</option>
        <option value="FOREVER">Every period</option>
      </select>
      <p id="coupon-duration-help" class="muted small">
        One-time purchases are discounted once whatever you choose.
      </p>
      {duration === 'REPEATING' && (
        <>
          <label for="coupon-periods">Billing periods</label>
          <input id="coupon-periods" type="number" min={1} max={1000} required value={periods} onInput={(e) => setPeriods(e.currentTarget.value)} />
        </>
      )}
      <CheckedField
        id="coupon-max"
        label="Redemption limit (optional)"
        inputMode="numeric"
        value={max}
        error={errors.max}
        hint="How many checkouts may use it in all, through any of its codes. Empty: no limit."
        onValue={(v) => (setMax(v), clear('max'))}
      />
      <CheckedField
        id="coupon-redeem-by"
        label="Expires (optional)"
        type="datetime-local"
        value={redeemBy}
        error={errors.redeemBy}
        hint={<>The last moment a checkout may apply it, in your time zone ({props.timeZone}). Subscriptions that already have it keep it. Empty: no expiry.</>}
        onValue={(v) => (setRedeemBy(v), clear('redeemBy'))}
      />
      <fieldset class="coupon-products" aria-describedby={describedBy(errors.products && 'coupon-products-error')}>
        <legend>Applies to</legend>
        <label>
          <input type="radio" name="coupon-scope" id="coupon-scope-all" checked={scope === 'all'} onChange={() => (setScope('all'), clear('products'))} /> All products
        </label>
        <label>
          <input type="radio" name="coupon-scope" id="coupon-scope-some" checked={scope === 'some'} disabled={!props.products || props.products.length === 0} onChange={() => setScope('some')} /> Only these products
        </label>
        {scope === 'some' &&
          props.products?.map((p) => (
            <label key={p.id} class="indent">
              <input
                type="checkbox"
                value={p.id}
                checked={chosen.includes(p.id)}
                onChange={(e) => (setChosen(e.currentTarget.checked ? [...chosen, p.id] : chosen.filter((id) => id !== p.id)), clear('products'))}
              />{' '}
              {p.name}
            </label>
          ))}
        {props.products && props.products.length === 0 && <p class="muted small">No published products yet: the coupon applies to any checkout.</p>}
        {props.productsError && <p class="muted small">The products could not be loaded ({props.productsError}).</p>}
        <FieldError id="coupon-products-error" message={errors.products} />
      </fieldset>
      <ErrorNotice message={create.error} />
      <button type="submit" class="primary" disabled={create.pending}>
        Create coupon
      </button>
    </form>
  );
}

type CodeErrors = Partial<Record<'max' | 'expiresAt', string>>;

function NewPromotionCode(props: { coupons: Coupon[]; timeZone: string; onCreated: () => void }) {
  const [couponId, setCouponId] = useState(props.coupons[0]!.id);
  const [code, setCode] = useState('');
  const [max, setMax] = useState('');
  const [expiresAt, setExpiresAt] = useState('');
  const [firstOrder, setFirstOrder] = useState(false);
  const [once, setOnce] = useState(false);
  const [errors, setErrors] = useState<CodeErrors>({});
  const create = useAction(createPromotionCode);
  const clear = (field: keyof CodeErrors) => errors[field] && setErrors({ ...errors, [field]: undefined });
  return (
    <form
      class="card"
      aria-labelledby="new-code-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const found: CodeErrors = {};
        const limit = parseRedemptionLimit(max);
        if ('problem' in limit) found.max = limit.problem;
        const expiry = expiryProblem(expiresAt, new Date(), props.timeZone);
        if (expiry) found.expiresAt = expiry;
        setErrors(found);
        if (found.max || found.expiresAt) {
          document.getElementById(found.max ? 'code-max' : 'code-expires-at')?.focus();
          return;
        }
        const created = await create.run({
          couponId,
          code: code.trim(),
          firstTimeTransaction: firstOrder,
          oncePerCustomer: once,
          ...('limit' in limit && limit.limit !== undefined ? { maxRedemptions: limit.limit } : {}),
          ...(expiresAt.trim() ? { expiresAt: localInputToIso(expiresAt, props.timeZone)! } : {}),
        });
        if (created) {
          setCode('');
          setMax('');
          setExpiresAt('');
          props.onCreated();
        }
      }}
    >
      <h3 id="new-code-title">New promotion code</h3>
      <label for="code-coupon">Coupon</label>
      <select id="code-coupon" value={couponId} onChange={(e) => setCouponId(e.currentTarget.value)}>
        {props.coupons.map((c) => (
          <option key={c.id} value={c.id}>
            {c.name}
          </option>
        ))}
      </select>
      <label for="code-text">Code (buyers type it in any case)</label>
      <input id="code-text" required pattern="[A-Za-z0-9_\-]{3,40}" maxLength={40} value={code} aria-describedby="code-text-help" onInput={(e) => setCode(e.currentTarget.value)} />
      <p id="code-text-help" class="muted small">
        3–40 letters, digits, - or _. The coupon's own limits and expiry apply too.
      </p>
      <CheckedField
        id="code-max"
        label="Redemption limit (optional)"
        inputMode="numeric"
        value={max}
        error={errors.max}
        hint="How many checkouts may use this code. Empty: no limit of its own."
        onValue={(v) => (setMax(v), clear('max'))}
      />
      <CheckedField
        id="code-expires-at"
        label="Expires (optional)"
        type="datetime-local"
        value={expiresAt}
        error={errors.expiresAt}
        hint={<>The last moment a buyer may use it, in your time zone ({props.timeZone}). Empty: until the coupon ends.</>}
        onValue={(v) => (setExpiresAt(v), clear('expiresAt'))}
      />
      <label>
        <input type="checkbox" checked={firstOrder} onChange={(e) => setFirstOrder(e.currentTarget.checked)} /> First order only
      </label>
      <label>
        <input type="checkbox" checked={once} onChange={(e) => setOnce(e.currentTarget.checked)} /> Once per customer
      </label>
      <p class="muted small">First order only: a buyer with no earlier order (by e-mail). Once per customer: one redemption per buyer e-mail.</p>
      <ErrorNotice message={create.error} />
      <button type="submit" class="primary" disabled={create.pending}>
        Create promotion code
      </button>
    </form>
  );
}
