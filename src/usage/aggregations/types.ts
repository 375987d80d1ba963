/** One contribution to a meter: an event or span, its time, its id and the value of the meter's property. */
export interface Contribution {
  /** Epoch milliseconds. */
  at: number;
  id: string;
  /** The property's value; undefined when the event or span lacks it. */
  value: unknown;
}

export type AggregationKind = 'count' | 'sum' | 'max' | 'unique' | 'last';

/** One kind of aggregation: what a period's contributions amount to (0 when nothing contributes). */
export interface Aggregation {
  kind: AggregationKind;
  /** Whether the kind reads a property (all but count). */
  readsProperty: boolean;
  quantity(contributions: readonly Contribution[]): number;
}

export const isNumber = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
