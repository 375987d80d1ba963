/** One order: amounts, status, timeline, customer, processor ids with links to the processor's own page, its webhook deliveries. */
import type { ComponentChildren } from 'preact';
import { useRoute } from 'preact-iso';
import { ErrorNotice, Fields, Loading, Money, PageHeader, Time } from '../../components/ui';
import { explorerAddressUrl, explorerTxUrl, stripeDashboardUrl } from '../../shared/links';
import { consoleTimeZone } from '../../shared/time-zone';
import { OrderDeliveries } from './components/order-deliveries';
import { cardPaymentFacts } from './lib/payment-facts';
import { OrderLines } from './components/order-lines';
import { OrderStatus } from './components/order-status';
import { OrderTimeline, orderTimeline } from './components/order-timeline';
import { useOrder, useOrderDisputes, useOrderRefunds, type Order } from './use-orders';

function External(props: { href: string | undefined; children: ComponentChildren }) {
  return props.href ? (
    <a href={props.href} target="_blank" rel="noopener noreferrer" class="mono id" title={typeof props.children === 'string' ? props.children : undefined}>
      {props.children}
      <span class="visually-hidden"> (opens in a new tab)</span>
    </a>
  ) : (
    <span class="mono id" title={typeof props.children === 'string' ? props.children : undefined}>
      {props.children}
    </span>
  );
}

export function OrderDetailPage(props: { extra?: (order: Order, reload: () => void) => ComponentChildren }) {
  const { params } = useRoute();
  const id = params.id!;
  const timeZone = consoleTimeZone();
  const order = useOrder(id);
  const refunds = useOrderRefunds(id);
  const disputes = useOrderDisputes(id);
  const reload = () => {
    order.reload();
    refunds.reload();
    disputes.reload();
  };
  const o = order.data;
  const card = o && o.provider !== 'CRYPTO' ? cardPaymentFacts(o) : undefined;
  return (
    <>
      <PageHeader title={o ? `Order ${o.orderId}` : 'Order'} />
      <p>
        <a href="/console/orders">← Orders</a>
      </p>
      <ErrorNotice message={order.error} retry={order.reload} />
      {!o && !order.error && <Loading />}
      {o && (
        <>
          <div class="card">
            <Fields
              items={[
                ['Amount', <Money minor={o.amountCents} currency={o.currency} />],
                ['Refunded', o.amountRefundedCents ? <Money minor={o.amountRefundedCents} currency={o.currency} /> : '—'],
                ['Status', <OrderStatus order={o} />],
                ['Product', o.productId ? <a href={`/console/catalog/products/${o.productId}`}>{o.productName ?? o.productId}</a> : (o.productName ?? '—')],
                ['Customer', <a href={`/console/customers/${o.customerId}`}>{o.customerEmail}</a>],
                ['Subscription', o.subscriptionId ? <a href={`/console/subscriptions/${o.subscriptionId}`} class="mono">{o.subscriptionId}</a> : '—'],
                ['Created', <Time iso={o.createdAt} timeZone={timeZone} />],
                ['Merchant reference', o.merchantReference ?? '—'],
              ]}
            />
          </div>
          <OrderLines order={o} />
          {props.extra?.(o, reload)}
          <div class="card">
            <h2>Payment</h2>
            <Fields
              items={
                o.provider === 'CRYPTO'
                  ? [
                      ['Rail', 'Crypto'],
                      ['Chain', o.chain ?? '—'],
                      ['Transaction', o.txHash ? <External href={explorerTxUrl(o.chain, o.txHash)}>{o.txHash}</External> : '—'],
                      ['Buyer wallet', o.fromAddress ? <External href={explorerAddressUrl(o.chain, o.fromAddress)}>{o.fromAddress}</External> : '—'],
                    ]
                  : [
                      ['Rail', card!.rail],
                      ['Payment', o.providerPaymentId ? <External href={card!.linkToStripe ? stripeDashboardUrl(o.providerPaymentId) : undefined}>{o.providerPaymentId}</External> : '—'],
                      [card!.sandbox ? 'Sandbox status' : 'Processor status', card!.processorStatus],
                      ['Funds available', card!.fundsNote ?? <Time iso={o.settledAvailableOn} timeZone={timeZone} />],
                    ]
              }
            />
          </div>
          <div class="card">
            <h2>Timeline</h2>
            <ErrorNotice message={refunds.error ?? disputes.error} retry={reload} />
            <OrderTimeline entries={orderTimeline(o, refunds.data ?? [], disputes.data ?? [])} timeZone={timeZone} />
          </div>
          <OrderDeliveries orderId={o.orderId} timeZone={timeZone} />
          {o.merchantMetadata && Object.keys(o.merchantMetadata).length > 0 && (
            <div class="card">
              <h2>Metadata</h2>
              <Fields items={Object.entries(o.merchantMetadata).map(([k, v]) => [k, String(v)])} />
            </div>
          )}
        </>
      )}
    </>
  );
}
