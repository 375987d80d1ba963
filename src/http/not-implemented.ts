import { AppError } from '../kernel/errors.js';

/**
 * Handlers for operations that are part of the contract but whose issue has not landed: they
 * answer 501 `NOT_IMPLEMENTED` in the envelope. Listing them by name keeps the handler maps
 * complete, so the compiler still proves every operation of every document is routed.
 */
export function notImplementedHandlers<K extends string>(operationIds: readonly K[]): Record<K, () => Promise<never>> {
  const handler = async (): Promise<never> => {
    throw new AppError('NOT_IMPLEMENTED', 'This operation is part of the contract but not implemented yet');
  };
  return Object.fromEntries(operationIds.map((id) => [id, handler])) as Record<K, () => Promise<never>>;
}
