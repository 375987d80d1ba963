/** The order's lines: what each charges (quantity × unit price, or a meter's usage), its amount, and the total they add up to. */
import { formatMoney, formatQuantity, formatUnitAmount } from '../../../shared/format';
import type { Order } from '../use-orders';

type Line = Order['lines'][number];

const KIND: Record<Line['kind'], string> = {
  PRICE: 'Price',
  USAGE: 'Usage',
  CREDIT: 'Credit',
  DISCOUNT: 'Discount',
  PRORATION: 'Proration',
  TAX: 'Tax',
  BALANCE: 'Credit balance',
};

/** How a usage line was priced, in a few words (per unit price, package, tiers), with its included and credited units. */
export function usageDetail(line: Line, currency: string): string | null {
  const usage = line.usage;
  if (!usage) return null;
  const parts: string[] = [];
  if (usage.includedUnits) parts.push(`${formatQuantity(String(usage.includedUnits))} included`);
  if (usage.creditedUnits) parts.push(`${formatQuantity(String(usage.creditedUnits))} from credit`);
  const billable = formatQuantity(usage.billableQuantity);
  const p = usage.pricing;
  if (p.model === 'PER_UNIT' && p.unitAmountDecimal) parts.push(`${billable} billed × ${formatUnitAmount(p.unitAmountDecimal, currency)}`);
  else if (p.model === 'PACKAGE' && p.packageSize && p.packageAmountDecimal) parts.push(`${billable} billed in packages of ${formatQuantity(String(p.packageSize))} × ${formatUnitAmount(p.packageAmountDecimal, currency)}`);
  else if (usage.tiers) {
    const tiers = usage.tiers.map((t) => `${formatQuantity(t.quantity)} × ${formatUnitAmount(t.unitAmountDecimal, currency)}${t.flatAmountCents ? ` + ${formatMoney(t.flatAmountCents, currency)}` : ''}`);
    parts.push(`${billable} billed (${p.model === 'GRADUATED' ? 'graduated' : 'volume'}: ${tiers.join('; ')})`);
  }
  return parts.join(' · ');
}

export function OrderLines(props: { order: Order }) {
  const o = props.order;
  return (
    <div class="card">
      <h2 id="order-lines">Lines</h2>
      <div class="table-wrap">
        <table aria-labelledby="order-lines" data-testid="order-lines">
          <thead>
            <tr>
              <th scope="col">Item</th>
              <th scope="col" class="num hide-narrow">Quantity</th>
              <th scope="col" class="num hide-narrow">Unit price</th>
              <th scope="col" class="num">Amount</th>
            </tr>
          </thead>
          <tbody>
            {o.lines.map((l, i) => {
              const detail = usageDetail(l, o.currency);
              // At 390 px the quantity and unit price columns fold into the item's cell.
              const folded = l.quantity !== null && l.unitAmountDecimal !== null ? `${formatQuantity(l.quantity)} × ${formatUnitAmount(l.unitAmountDecimal, o.currency)}` : null;
              return (
                <tr key={i} data-testid="order-line">
                  <td>
                    {l.description} <span class="badge neutral">{KIND[l.kind]}</span>
                    {folded && <div class="muted small only-narrow">{folded}</div>}
                    {detail && <div class="muted small">{detail}</div>}
                    {l.usage && (
                      <div class="small">
                        Meter <a class="mono" href={`/console/meters/${l.usage.meterId}`}>{l.usage.meterId}</a>
                      </div>
                    )}
                  </td>
                  <td class="num hide-narrow">{l.quantity === null ? '—' : formatQuantity(l.quantity)}</td>
                  <td class="num hide-narrow">{l.unitAmountDecimal === null ? '—' : formatUnitAmount(l.unitAmountDecimal, o.currency)}</td>
                  <td class="num">{formatMoney(l.amountCents, o.currency)}</td>
                </tr>
              );
            })}
          </tbody>
          <tfoot>
            <tr>
              <th scope="row">Total</th>
              <td class="hide-narrow" />
              <td class="hide-narrow" />
              <td class="num" data-testid="order-lines-total">
                <strong>{formatMoney(o.amountCents, o.currency)}</strong>
              </td>
            </tr>
          </tfoot>
        </table>
      </div>
    </div>
  );
}
