import type { Aggregation } from './types.js';

/** How many events or spans matched. */
export const count: Aggregation = {
  kind: 'count',
  readsProperty: false,
  quantity: (contributions) => contributions.length,
};
