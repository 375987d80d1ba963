/**
 * The console's routes (preact-iso: real links, history, deep links; every path below
 * /console/ is served index.html by the server). Signed out, every page shows sign-in and
 * returns to the page asked for.
 */
import { LocationProvider, Route, Router, useLocation } from 'preact-iso';
import { useEffect } from 'preact/hooks';
import { Layout } from './components/layout';
import { Loading } from './components/ui';
import { SessionProvider, useSession } from './shared/session';
import { filtersToQuery } from './shared/format';
import { SignInPage } from './routes/sign-in/sign-in-page';
import { SignInLinkPage } from './routes/sign-in/sign-in-link-page';
import { HomePage } from './routes/home/home-page';
import { OrdersPage } from './routes/orders/orders-page';
import { OrderDetailPage } from './routes/orders/order-detail-page';
import { SubscriptionDetailPage } from './routes/subscriptions/subscription-detail-page';
import { PlanChange } from './routes/subscriptions/components/plan-change';
import { CustomerDetailPage } from './routes/customers/customer-detail-page';
import { LinkPasswordPage } from './routes/sign-in/link-password-page';
import { RefundForm } from './routes/orders/components/refund-form';
import { SubscriptionActions } from './routes/subscriptions/components/subscription-actions';
import { SubscriptionsPage } from './routes/subscriptions/subscriptions-page';
import { CustomersPage } from './routes/customers/customers-page';
import { CatalogPage } from './routes/catalog/catalog-page';
import { DevelopersPage } from './routes/developers/developers-page';
import { AgentsPage } from './routes/agents/agents-page';
import { SettingsPage } from './routes/settings/settings-page';
import { TelemetryPage } from './routes/telemetry/telemetry-page';
import { MetersPage } from './routes/meters/meters-page';
import { NotFoundPage } from './routes/not-found';

/** Pages a signed-out visitor may see. */
const PUBLIC_PATHS = ['/console/sign-in', '/console/sign-in-link', '/console/accept-invite', '/console/reset-password'];

/** The order page with the refund form for roles that may refund (the API decides anyway). */
function OrderDetailWithActions() {
  const { can } = useSession();
  return <OrderDetailPage extra={can('orders:refund') ? (order, reload) => <RefundForm order={order} onRefunded={reload} /> : undefined} />;
}

function SubscriptionDetailWithActions() {
  const { can } = useSession();
  return (
    <SubscriptionDetailPage
      extra={
        can('subscriptions:manage')
          ? (s, reload) => (
              <>
                <SubscriptionActions subscription={s} onChanged={reload} />
                <PlanChange subscription={s} onChanged={reload} />
              </>
            )
          : undefined
      }
    />
  );
}

function SignedIn() {
  return (
    <Layout>
      <Router>
        <Route path="/console/" component={HomePage} />
        <Route path="/console/orders" component={OrdersPage} />
        <Route path="/console/orders/:id" component={OrderDetailWithActions} />
        <Route path="/console/subscriptions" component={SubscriptionsPage} />
        <Route path="/console/subscriptions/:id" component={SubscriptionDetailWithActions} />
        <Route path="/console/customers" component={CustomersPage} />
        <Route path="/console/customers/:id" component={CustomerDetailPage} />
        <Route path="/console/catalog/:rest*" component={CatalogPage} />
        <Route path="/console/meters/:rest*" component={MetersPage} />
        <Route path="/console/developers/:rest*" component={DevelopersPage} />
        <Route path="/console/agents/:rest*" component={AgentsPage} />
        <Route path="/console/telemetry/:rest*" component={TelemetryPage} />
        <Route path="/console/settings/:rest*" component={SettingsPage} />
        <Route default component={NotFoundPage} />
      </Router>
    </Layout>
  );
}

function Gate() {
  const { session, loading } = useSession();
  const { path, url, route } = useLocation();
  const isPublic = PUBLIC_PATHS.includes(path);
  useEffect(() => {
    if (!loading && !session && !isPublic) route(`/console/sign-in${filtersToQuery({ next: url })}`, true);
    if (!loading && session && path === '/console/sign-in') route('/console/', true);
    // A restricted session (the organization requires a second factor, no passkey yet) can only add one.
    else if (!loading && session?.secondFactor.restricted && !isPublic && path !== '/console/settings/security') route('/console/settings/security', true);
  }, [loading, session, isPublic, path, url, route]);
  if (path === '/console/sign-in-link') return <SignInLinkPage />;
  if (path === '/console/accept-invite') return <LinkPasswordPage kind="invite" />;
  if (path === '/console/reset-password') return <LinkPasswordPage kind="reset" />;
  // The page asks for its data once the session is known: a signed-out visitor's load then makes
  // no request that fails (a red 401 in the browser's console), at the cost of one round trip.
  if (loading) return <Loading label="Loading the console…" />;
  if (!session) return <SignInPage />;
  return <SignedIn />;
}

export function App() {
  return (
    <LocationProvider scope="/console/">
      <SessionProvider>
        <Gate />
      </SessionProvider>
    </LocationProvider>
  );
}
