/**
 * The frame of every signed-in page: a skip link, the navigation (a list of real links, so the
 * keyboard, the browser and a screen reader all know them), the organization and the member.
 * Below 768 px the navigation folds behind a "Menu" button.
 */
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { useSession } from '../shared/session';
import { consoleApi } from '../shared/api';
import { EmailAddress } from './ui';

export const NAVIGATION: ReadonlyArray<{ href: string; label: string }> = [
  { href: '/console/', label: 'Home' },
  { href: '/console/orders', label: 'Orders' },
  { href: '/console/subscriptions', label: 'Subscriptions' },
  { href: '/console/customers', label: 'Customers' },
  { href: '/console/catalog', label: 'Catalog' },
  { href: '/console/meters', label: 'Meters' },
  { href: '/console/developers', label: 'Developers' },
  { href: '/console/agents', label: 'Agent wallets' },
  { href: '/console/telemetry', label: 'Telemetry' },
  { href: '/console/settings', label: 'Settings' },
];

function isCurrent(href: string, path: string): boolean {
  if (href === '/console/') return path === '/console/' || path === '/console';
  return path === href || path.startsWith(`${href}/`);
}

export function Layout(props: { children: ComponentChildren }) {
  const { session, setSession } = useSession();
  const { path } = useLocation();
  const [open, setOpen] = useState(false);
  const signOut = async () => {
    await consoleApi.POST('/v1/console/sign-out');
    setSession(undefined);
  };
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href="/console/">
          Kassa
        </a>
        <span class="org" title="Organization">
          {session?.organization.name}
        </span>
        <button type="button" class="menu-button" aria-expanded={open} aria-controls="nav" onClick={() => setOpen(!open)}>
          Menu
        </button>
      </header>
      <nav id="nav" class={open ? 'nav open' : 'nav'} aria-label="Console">
        <ul>
          {NAVIGATION.map((item) => (
            <li key={item.href}>
              <a href={item.href} aria-current={isCurrent(item.href, path) ? 'page' : undefined} onClick={() => setOpen(false)}>
                {item.label}
              </a>
            </li>
          ))}
        </ul>
        <div class="who">
          <span>{session && <EmailAddress email={session.user.email} />}</span>
          <span class="role">{session?.role}</span>
          <button type="button" class="link-button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </nav>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </div>
  );
}
