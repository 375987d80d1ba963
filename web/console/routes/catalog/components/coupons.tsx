/**
 * Catalog → Coupons (issue 39): the organization's coupons with their promotion codes and how often
 * each was redeemed, a form for a new coupon and one for a code of a coupon. Only the merchant API's
 * operations (`listCoupons`, `listPromotionCodes`, `createCoupon`, `createPromotionCode`), which a
 * console session may call with its role's permissions.
 */
import { useState } from 'preact/hooks';
import type { components } from '../../../../../generated/merchant';
import { Badge, Empty, ErrorNotice, Loading, Money, Time } from '../../../components/ui';
import { merchantApi } from '../../../shared/api';
import { useAction, useApi } from '../../../shared/use-api';
import { useSession } from '../../../shared/session';

type Coupon = components['schemas']['Coupon'];
type PromotionCode = components['schemas']['PromotionCode'];

const useCoupons = () => useApi(() => merchantApi.GET('/v1/coupons').then((r) => ({ ...r, data: r.data?.data })), []);
const usePromotionCodes = () => useApi(() => merchantApi.GET('/v1/promotion-codes', { params: { query: {} } }).then((r) => ({ ...r, data: r.data?.data })), []);
const createCoupon = (body: components['schemas']['CouponCreate']) => merchantApi.POST('/v1/coupons', { body }).then((r) => ({ ...r, data: r.data?.data }));
const createPromotionCode = (body: components['schemas']['PromotionCodeCreate']) => merchantApi.POST('/v1/promotion-codes', { body }).then((r) => ({ ...r, data: r.data?.data }));

function terms(c: Coupon) {
  return c.percentOff !== null ? <>{c.percentOff}% off</> : <><Money minor={c.amountOff!} currency={c.currency!} /> off</>;
}
const durationText = (c: Coupon) => (c.duration === 'ONCE' ? 'once' : c.duration === 'FOREVER' ? 'forever' : `${c.durationInPeriods} billing periods`);
const redemptions = (used: number, max: number | null) => (max === null ? `${used}` : `${used} of ${max}`);

export function CouponsSection() {
  const { can } = useSession();
  const coupons = useCoupons();
  const codes = usePromotionCodes();
  const codesOf = (id: string): PromotionCode[] => codes.data?.records.filter((p) => p.couponId === id) ?? [];
  return (
    <section aria-labelledby="coupons-title">
      <h2 id="coupons-title">Coupons</h2>
      <ErrorNotice message={coupons.error ?? codes.error} retry={() => (coupons.reload(), codes.reload())} />
      {!coupons.data && !coupons.error && <Loading />}
      {coupons.data && coupons.data.records.length === 0 && <Empty>No coupons yet.</Empty>}
      {coupons.data && coupons.data.records.length > 0 && (
        <div class="table-wrap">
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
                    {c.redeemBy && (
                      <div class="muted small">
                        Until <Time iso={c.redeemBy} />
                      </div>
                    )}
                  </td>
                  <td>
                    {terms(c)}, {durationText(c)}
                    {c.productIds && <div class="muted small">{c.productIds.length === 1 ? '1 product' : `${c.productIds.length} products`}</div>}
                  </td>
                  <td class="num" data-testid="coupon-redemptions">{redemptions(c.timesRedeemed, c.maxRedemptions)}</td>
                  <td>
                    {codesOf(c.id).length === 0 ? (
                      <span class="muted">None</span>
                    ) : (
                      <ul class="plain">
                        {codesOf(c.id).map((p) => (
                          <li key={p.id} data-testid="promotion-code">
                            <code>{p.code}</code> · {redemptions(p.timesRedeemed, p.maxRedemptions)} redeemed
                            {p.firstTimeTransaction && ' · first order only'}
                            {p.oncePerCustomer && ' · once per customer'}
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
      )}
      {can('checkout:write') && <NewCoupon onCreated={coupons.reload} />}
      {can('checkout:write') && coupons.data && coupons.data.records.length > 0 && <NewPromotionCode coupons={coupons.data.records} onCreated={codes.reload} />}
    </section>
  );
}

function NewCoupon(props: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [kind, setKind] = useState<'percent' | 'amount'>('percent');
  const [value, setValue] = useState('');
  const [currency, setCurrency] = useState('USD');
  const [duration, setDuration] = useState<Coupon['duration']>('ONCE');
  const [periods, setPeriods] = useState('3');
  const [max, setMax] = useState('');
  const create = useAction(createCoupon);
  return (
    <form
      class="card"
      aria-labelledby="new-coupon-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const off = kind === 'percent' ? { percentOff: value.trim() } : { amountOff: Math.round(Number(value) * 100), currency: currency.trim().toUpperCase() };
        const created = await create.run({ name, duration, ...off, ...(duration === 'REPEATING' ? { durationInPeriods: Number(periods) } : {}), ...(max.trim() ? { maxRedemptions: Number(max) } : {}) });
        if (created) {
          setName('');
          setValue('');
          props.onCreated();
        }
      }}
    >
      <h3 id="new-coupon-title">New coupon</h3>
      <label for="coupon-name">Name</label>
      <input id="coupon-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      <label for="coupon-kind">Discount</label>
      <select id="coupon-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value as 'percent' | 'amount')}>
        <option value="percent">Percent off</option>
        <option value="amount">Amount off</option>
      </select>
      <label for="coupon-value">{kind === 'percent' ? 'Percent (0.01–100)' : 'Amount (e.g. 5.00)'}</label>
      <input id="coupon-value" required inputMode="decimal" value={value} onInput={(e) => setValue(e.currentTarget.value)} />
      {kind === 'amount' && (
        <>
          <label for="coupon-currency">Currency</label>
          <input id="coupon-currency" required maxLength={3} value={currency} onInput={(e) => setCurrency(e.currentTarget.value)} />
        </>
      )}
      <label for="coupon-duration">On subscriptions</label>
      <select id="coupon-duration" value={duration} onChange={(e) => setDuration(e.currentTarget.value as Coupon['duration'])}>
        <option value="ONCE">First charged period</option>
        <option value="REPEATING">Several billing periods</option>
        <option value="FOREVER">Every period</option>
      </select>
      {duration === 'REPEATING' && (
        <>
          <label for="coupon-periods">Billing periods</label>
          <input id="coupon-periods" type="number" min={1} max={1000} required value={periods} onInput={(e) => setPeriods(e.currentTarget.value)} />
        </>
      )}
      <label for="coupon-max">Redemptions at most (optional)</label>
      <input id="coupon-max" type="number" min={1} value={max} onInput={(e) => setMax(e.currentTarget.value)} />
      <ErrorNotice message={create.error} />
      <button type="submit" class="primary" disabled={create.pending}>
        Create coupon
      </button>
    </form>
  );
}

function NewPromotionCode(props: { coupons: Coupon[]; onCreated: () => void }) {
  const [couponId, setCouponId] = useState(props.coupons[0]!.id);
  const [code, setCode] = useState('');
  const [firstOrder, setFirstOrder] = useState(false);
  const [once, setOnce] = useState(false);
  const create = useAction(createPromotionCode);
  return (
    <form
      class="card"
      aria-labelledby="new-code-title"
      onSubmit={async (e) => {
        e.preventDefault();
        const created = await create.run({ couponId, code: code.trim(), firstTimeTransaction: firstOrder, oncePerCustomer: once });
        if (created) {
          setCode('');
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
      <input id="code-text" required pattern="[A-Za-z0-9_\-]{3,40}" maxLength={40} value={code} onInput={(e) => setCode(e.currentTarget.value)} />
      <label>
        <input type="checkbox" checked={firstOrder} onChange={(e) => setFirstOrder(e.currentTarget.checked)} /> First order only
      </label>
      <label>
        <input type="checkbox" checked={once} onChange={(e) => setOnce(e.currentTarget.checked)} /> Once per customer
      </label>
      <ErrorNotice message={create.error} />
      <button type="submit" class="primary" disabled={create.pending}>
        Create promotion code
      </button>
    </form>
  );
}
