import { isNumber, type Aggregation } from './types.js';

/** The sum of the numeric property; other values do not contribute. */
export const sum: Aggregation = {
  kind: 'sum',
  readsProperty: true,
  quantity: (contributions) => {
    let total = 0;
    for (const c of contributions) if (isNumber(c.value)) total += c.value;
    return total;
  },
};
