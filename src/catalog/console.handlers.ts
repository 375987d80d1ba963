/**
 * The console's catalog operations (openapi/console.yaml, tag Catalog): the admin API's work,
 * done by the same CatalogService methods, scoped to the member's organization (a resource of
 * another organization is the same 404 as a missing one). Audit entries are written at
 * composition (src/accounts/audit.handlers.ts).
 */
import type { ConsoleHandlers } from '../handler-maps.js';
import { page } from '../kernel/present.js';
import type { PaymentLink, Price, Product } from './catalog.repository.js';
import { presentLink, presentPrice, presentProduct } from './catalog.presenter.js';
import type { CatalogService } from './catalog.service.js';

export type CatalogConsoleHandlers = Pick<
  ConsoleHandlers,
  | 'listConsoleProducts' | 'createConsoleProduct' | 'updateConsoleProduct' | 'archiveConsoleProduct'
  | 'listConsoleProductPrices' | 'createConsolePrice' | 'updateConsolePrice' | 'deactivateConsolePrice'
  | 'listConsolePaymentLinks' | 'createConsolePaymentLink' | 'deactivateConsolePaymentLink'
>;

export function createCatalogConsoleHandlers(catalog: CatalogService): CatalogConsoleHandlers {
  const presentConsoleLink = (found: { link: PaymentLink; price: Price; product: Pick<Product, 'name'> }) => ({
    ...presentLink(catalog.paymentLinkUrl(found.link), found),
    productName: found.product.name,
    amount: found.price.amount,
    currency: found.price.currency,
    pricingType: found.price.pricingType,
    pricingName: found.price.pricingName,
    billingInterval: found.price.billingInterval,
    billingIntervalCount: found.price.billingIntervalCount,
  });
  /** A link the service just changed, with its product's name. */
  const withProduct = async (orgId: string, found: { link: PaymentLink; price: Price }) =>
    presentConsoleLink({ ...found, product: await catalog.getProduct(found.price.productId, orgId) });

  return {
    listConsoleProducts: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await catalog.listProducts(auth.orgId, { page: pageNumber, size, search: query.search, status: query.status });
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentProduct), total, pageNumber, size) } };
    },
    createConsoleProduct: async ({ auth, body }) => ({
      status: 201,
      body: { success: true, message: 'Product created', data: presentProduct(await catalog.createProduct(auth.orgId, body)) },
    }),
    updateConsoleProduct: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Product updated', data: presentProduct(await catalog.updateProduct(params.id, body, auth.orgId)) },
    }),
    archiveConsoleProduct: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Product archived', data: presentProduct(await catalog.archiveProduct(params.id, auth.orgId)) },
    }),
    listConsoleProductPrices: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'OK', data: (await catalog.listPrices(params.id, auth.orgId)).map(presentPrice) },
    }),
    createConsolePrice: async ({ auth, params, body }) => ({
      status: 201,
      body: { success: true, message: 'Price created', data: presentPrice(await catalog.createPrice(params.id, body, auth.orgId)) },
    }),
    updateConsolePrice: async ({ auth, params, body }) => ({
      status: 200,
      body: { success: true, message: 'Price updated', data: presentPrice(await catalog.renamePrice(params.id, body.pricingName, auth.orgId)) },
    }),
    deactivateConsolePrice: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Price deactivated', data: presentPrice(await catalog.deactivatePrice(params.id, auth.orgId)) },
    }),
    listConsolePaymentLinks: async ({ auth, query }) => {
      const pageNumber = query.page ?? 1;
      const size = query.size ?? 20;
      const { records, total } = await catalog.listPaymentLinks(auth.orgId, {
        page: pageNumber,
        size,
        productId: query.productId,
        priceId: query.pricingId,
        active: query.active,
      });
      return { status: 200, body: { success: true, message: 'OK', data: page(records.map(presentConsoleLink), total, pageNumber, size) } };
    },
    createConsolePaymentLink: async ({ auth, params, body }) => ({
      status: 201,
      body: { success: true, message: 'Payment link created', data: await withProduct(auth.orgId, await catalog.createPaymentLink(params.id, body ?? {}, auth.orgId)) },
    }),
    deactivateConsolePaymentLink: async ({ auth, params }) => ({
      status: 200,
      body: { success: true, message: 'Payment link deactivated', data: await withProduct(auth.orgId, await catalog.deactivatePaymentLink(params.id, auth.orgId)) },
    }),
  };
}
