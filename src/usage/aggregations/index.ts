/**
 * The meter aggregations, one small unit per kind (like Lago's billable_metrics/aggregations and
 * Polar's meter/aggregation.py). Usage events are aggregated by the database in the same terms
 * (src/usage/usage.repository.ts); spans, read from telemetry, by these units.
 */
import { count } from './count.js';
import { last } from './last.js';
import { max } from './max.js';
import { sum } from './sum.js';
import type { Aggregation, AggregationKind } from './types.js';
import { unique } from './unique.js';

export type { Aggregation, AggregationKind, Contribution } from './types.js';

export const AGGREGATIONS: Readonly<Record<AggregationKind, Aggregation>> = { count, sum, max, unique, last };
