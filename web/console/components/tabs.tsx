/** Sub-pages of a section as links (each tab has its URL). */
import { useLocation } from 'preact-iso';

export function Tabs(props: { label: string; tabs: Array<{ href: string; label: string }> }) {
  const { path } = useLocation();
  return (
    <nav class="tabs" aria-label={props.label}>
      {props.tabs.map((tab) => (
        <a key={tab.href} href={tab.href} aria-current={path === tab.href ? 'page' : undefined}>
          {tab.label}
        </a>
      ))}
    </nav>
  );
}
