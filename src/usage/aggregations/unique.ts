import type { Aggregation } from './types.js';

/** How many distinct values the property takes (a string and a number are different values). */
export const unique: Aggregation = {
  kind: 'unique',
  readsProperty: true,
  quantity: (contributions) => {
    const seen = new Set<string>();
    for (const c of contributions) if (c.value !== undefined && c.value !== null) seen.add(JSON.stringify(c.value));
    return seen.size;
  },
};
