/** The usage domain's model: usage events as stored, meters and their quantities. */
import type { AggregationKind } from './aggregations/index.js';

export type Scalar = string | number | boolean;

export interface UsageEvent {
  orgId: string;
  id: string;
  customerId: string;
  name: string;
  timestamp: Date;
  properties: Record<string, Scalar>;
  receivedAt: Date;
}

export type MeterSource = 'EVENTS' | 'SPANS';
export type MeterStatus = 'ACTIVE' | 'ARCHIVED';
/** A usage-event meter's rollup: BUILDING (quantities read from the raw events) until the background build is READY (migration 0335). */
export type RollupStatus = 'BUILDING' | 'READY';

export interface MeterFilter {
  eventName?: string;
  properties?: Record<string, Scalar>;
  projectId?: string;
  model?: string;
  vendor?: string;
  attributes?: Record<string, Scalar>;
}

export interface Meter {
  id: string;
  orgId: string;
  name: string;
  source: MeterSource;
  filter: MeterFilter;
  aggregation: AggregationKind;
  property: string | null;
  customerAttribute: string | null;
  status: MeterStatus;
  rollupStatus: RollupStatus;
  createdAt: Date;
  updatedAt: Date;
  archivedAt: Date | null;
}

export type QuantityInterval = 'hour' | 'day' | 'month';

export interface QuantityBucket {
  start: Date;
  end: Date;
  quantity: number;
}
