import { PageHeader } from '../components/ui';

export function NotFoundPage() {
  return (
    <>
      <PageHeader title="Page not found" />
      <p>
        Nothing lives at this address. <a href="/console/">Go to the home page</a>.
      </p>
    </>
  );
}
