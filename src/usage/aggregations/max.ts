import { isNumber, type Aggregation } from './types.js';

/** The largest numeric value of the property; 0 when none. */
export const max: Aggregation = {
  kind: 'max',
  readsProperty: true,
  quantity: (contributions) => {
    let found: number | undefined;
    for (const c of contributions) if (isNumber(c.value) && (found === undefined || c.value > found)) found = c.value;
    return found ?? 0;
  },
};
