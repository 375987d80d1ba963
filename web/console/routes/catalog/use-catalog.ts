/** Typed data hooks and actions over the catalog operations of the console document. */
import type { components } from '../../../../generated/console';
import { consoleApi, merchantApi } from '../../shared/api';
import { useApi } from '../../shared/use-api';

export type PaymentLink = components['schemas']['ConsolePaymentLink'];

export const useProducts = (search: string | undefined) =>
  useApi(() => consoleApi.GET('/v1/console/products', { params: { query: { size: 50, ...(search ? { search } : {}) } } }).then((r) => ({ ...r, data: r.data?.data })), [search]);
export const usePrices = (productId: string) =>
  useApi(() => consoleApi.GET('/v1/console/products/{id}/prices', { params: { path: { id: productId } } }).then((r) => ({ ...r, data: r.data?.data })), [productId]);
export const usePaymentLinks = () => useApi(() => consoleApi.GET('/v1/console/payment-links', { params: { query: { size: 50 } } }).then((r) => ({ ...r, data: r.data?.data })), []);

export const createProduct = (name: string, description: string) =>
  consoleApi.POST('/v1/console/products', { body: { name, ...(description.trim() ? { description } : {}) } }).then((r) => ({ ...r, data: r.data?.data }));
export const archiveProduct = (id: string) => consoleApi.POST('/v1/console/products/{id}/archive', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));
export const createPrice = (productId: string, body: components['schemas']['PriceCreate']) =>
  consoleApi.POST('/v1/console/products/{id}/prices', { params: { path: { id: productId } }, body }).then((r) => ({ ...r, data: r.data?.data }));
export const renamePrice = (id: string, pricingName: string) =>
  consoleApi.PATCH('/v1/console/prices/{id}', { params: { path: { id } }, body: { pricingName } }).then((r) => ({ ...r, data: r.data?.data }));
export const deactivatePrice = (id: string) => consoleApi.POST('/v1/console/prices/{id}/deactivate', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));
export const createPaymentLink = (priceId: string) => consoleApi.POST('/v1/console/prices/{id}/payment-links', { params: { path: { id: priceId } }, body: {} }).then((r) => ({ ...r, data: r.data?.data }));
export const deactivatePaymentLink = (id: string) => consoleApi.POST('/v1/console/payment-links/{id}/deactivate', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data?.data }));

export const usePaywalls = (productId: string, enabled: boolean) =>
  useApi(
    () => (enabled ? consoleApi.GET('/v1/console/products/{id}/x402-paywalls', { params: { path: { id: productId } } }).then((r) => ({ ...r, data: r.data?.data })) : Promise.resolve({ data: [] })),
    [productId, enabled],
  );
/** The merchant API's paywall operations (x402:settle), which the session may call. */
export const setPaywall = (priceId: string, contentUrl: string) =>
  merchantApi.PUT('/v1/x402/paywalls/{id}', { params: { path: { id: priceId } }, body: contentUrl.trim() ? { contentUrl: contentUrl.trim() } : {} }).then((r) => ({ ...r, data: r.data?.data }));
export const removePaywall = (priceId: string) => merchantApi.DELETE('/v1/x402/paywalls/{id}', { params: { path: { id: priceId } } }).then((r) => ({ ...r, data: r.data?.data }));
