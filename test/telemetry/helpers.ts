/** Telemetry test helpers: projects and keys through the admin API, batch builders. */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { TestContext } from '../harness/context.js';

export interface TelemetryKeyFixture {
  orgId: string;
  projectId: string;
  key: string;
  keyId: string;
}

export async function createProjectWithKey(ctx: TestContext, orgId: string, name = 'Support Assistant', environment?: string): Promise<TelemetryKeyFixture> {
  const project = await ctx.admin.post(`/v1/orgs/${orgId}/telemetry-projects`).send({ name, ...(environment ? { environment } : {}) });
  expect(project.status).toBe(201);
  const key = await ctx.admin.post(`/v1/orgs/${orgId}/telemetry-keys`).send({ projectId: project.body.data.projectId });
  expect(key.status).toBe(201);
  return { orgId, projectId: project.body.data.projectId, key: key.body.data.key, keyId: key.body.data.telemetryKeyId };
}

export async function keyFor(ctx: TestContext, orgId: string, projectId: string): Promise<TelemetryKeyFixture> {
  const key = await ctx.admin.post(`/v1/orgs/${orgId}/telemetry-keys`).send({ projectId });
  expect(key.status).toBe(201);
  return { orgId, projectId, key: key.body.data.key, keyId: key.body.data.telemetryKeyId };
}

export const bearer = (key: string) => ({ Authorization: `Bearer ${key}` });

export const traceId = (): string => randomBytes(16).toString('hex');
export const spanId = (): string => randomBytes(8).toString('hex');

export const isoAt = (ms: number): string => new Date(ms).toISOString();

export interface SpanSpec {
  span_id?: string;
  parent_span_id?: string | null;
  name?: string;
  start: number;
  durationMs: number;
  attributes?: Record<string, unknown>;
  status?: 'OK' | 'ERROR' | 'UNSET';
}

export function span(spec: SpanSpec) {
  return {
    span_id: spec.span_id ?? spanId(),
    ...(spec.parent_span_id !== undefined ? { parent_span_id: spec.parent_span_id } : {}),
    name: spec.name ?? 'span',
    start_time: isoAt(spec.start),
    end_time: isoAt(spec.start + spec.durationMs),
    attributes: spec.attributes ?? {},
    ...(spec.status ? { status: { code: spec.status } } : {}),
  };
}

/** A deterministic PRNG for reproducible data sets. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
