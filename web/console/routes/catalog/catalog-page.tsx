import { PageHeader } from '../../components/ui';

export function CatalogPage() {
  return (
    <>
      <PageHeader title="Catalog" />
      <p>Coming in this version.</p>
    </>
  );
}
