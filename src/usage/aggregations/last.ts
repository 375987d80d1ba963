import { isNumber, type Aggregation } from './types.js';

/** The numeric value of the latest contribution that has one (ties broken by the greater id); 0 when none. */
export const last: Aggregation = {
  kind: 'last',
  readsProperty: true,
  quantity: (contributions) => {
    let latest: { at: number; id: string; value: number } | undefined;
    for (const c of contributions) {
      if (!isNumber(c.value)) continue;
      if (!latest || c.at > latest.at || (c.at === latest.at && c.id > latest.id)) latest = { at: c.at, id: c.id, value: c.value };
    }
    return latest?.value ?? 0;
  },
};
