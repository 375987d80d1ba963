import type { AdminHandlers } from '../handler-maps.js';
import { page } from '../kernel/present.js';
import type { OrgService } from '../orgs/orgs.service.js';
import type { PaymentLink, Price } from './catalog.repository.js';
import { presentLink as presentLinkWithUrl, presentPrice, presentProduct } from './catalog.presenter.js';
import type { CatalogService } from './catalog.service.js';

type CatalogAdminHandlers = Pick<
  AdminHandlers,
  | 'listOrgProducts' | 'createProduct' | 'updateProduct' | 'archiveProduct'
  | 'listProductPrices' | 'createPrice' | 'updatePrice' | 'deactivatePrice'
  | 'createPaymentLink' | 'deactivatePaymentLink'
>;

export function createCatalogAdminHandlers(catalog: CatalogService, orgs: OrgService): CatalogAdminHandlers {
  const presentLink = (found: { link: PaymentLink; price: Price }) => presentLinkWithUrl(catalog.paymentLinkUrl(found.link), found);

  return {
    listOrgProducts: async ({ params, query }) => {
      // An empty page would not tell a typo'd organization id from an empty catalog.
      await orgs.getOrganization(params.id);
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await catalog.listProducts(params.id, { page: pageNumber, size, search: query.search, status: query.status });
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentProduct), total, pageNumber, size) } };
    },
    createProduct: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Product created', data: presentProduct(await catalog.createProduct(params.id, body)) },
    }),
    updateProduct: async ({ params, body }) => ({
      status: 200,
      body: { success: true, message: 'Product updated', data: presentProduct(await catalog.updateProduct(params.id, body)) },
    }),
    archiveProduct: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Product archived', data: presentProduct(await catalog.archiveProduct(params.id)) },
    }),
    listProductPrices: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await catalog.listPrices(params.id)).map(presentPrice) },
    }),
    createPrice: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Price created', data: presentPrice(await catalog.createPrice(params.id, body)) },
    }),
    updatePrice: async ({ params, body }) => ({
      status: 200,
      body: { success: true, message: 'Price updated', data: presentPrice(await catalog.renamePrice(params.id, body.pricingName)) },
    }),
    deactivatePrice: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Price deactivated', data: presentPrice(await catalog.deactivatePrice(params.id)) },
    }),
    createPaymentLink: async ({ params, body }) => ({
      status: 201,
      body: { success: true, message: 'Payment link created', data: presentLink(await catalog.createPaymentLink(params.id, body ?? {})) },
    }),
    deactivatePaymentLink: async ({ params }) => ({
      status: 200,
      body: { success: true, message: 'Payment link deactivated', data: presentLink(await catalog.deactivatePaymentLink(params.id)) },
    }),
  };
}
