/**
 * OTLP/HTTP protobuf (`application/x-protobuf`) ⇄ the OTLP JSON form the contract validates
 * (openapi/telemetry.yaml, ingestOtlpTraces). Decoding and encoding use the protobufjs code that
 * OpenTelemetry JS generates from the official opentelemetry-proto definitions
 * (@opentelemetry/otlp-transformer, pinned: the module is reached by path).
 */
import { createRequire } from 'node:module';
import { validationError } from '../kernel/errors.js';

interface ProtoMessageType {
  decode(data: Uint8Array): object;
  toObject(message: object, options: Record<string, unknown>): Record<string, unknown>;
  fromObject(object: Record<string, unknown>): object;
  encode(message: object): { finish(): Uint8Array };
}

interface OtlpProtoRoot {
  opentelemetry: {
    proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtoMessageType; ExportTraceServiceResponse: ProtoMessageType } } } };
  };
}

const requireCjs = createRequire(import.meta.url);
const traceService = (requireCjs('@opentelemetry/otlp-transformer/build/src/generated/root.js') as OtlpProtoRoot).opentelemetry.proto.collector.trace.v1;

export const PROTOBUF_MEDIA_TYPE = 'application/x-protobuf';

/** The OTLP JSON mapping: 64-bit integers as decimal text, enums as numbers, bytes as base64, unset fields absent. */
const TO_JSON_FORM = { longs: String, enums: Number, bytes: String, defaults: false, arrays: false, objects: false, oneofs: false };

type Json = Record<string, unknown>;

/** OTLP JSON writes trace and span ids as hex, not base64 (the only bytes fields that differ). */
function idsToHex(holder: Json, keys: readonly string[]): void {
  for (const key of keys) {
    const value = holder[key];
    if (typeof value === 'string') holder[key] = Buffer.from(value, 'base64').toString('hex');
  }
}

const SPAN_IDS = ['traceId', 'spanId', 'parentSpanId'] as const;
const LINK_IDS = ['traceId', 'spanId'] as const;

/** A protobuf `ExportTraceServiceRequest` → its OTLP JSON form; a body protobuf cannot read is 400. */
export function decodeOtlpTraceRequest(raw: Uint8Array): Json {
  let request: Json;
  try {
    request = traceService.ExportTraceServiceRequest.toObject(traceService.ExportTraceServiceRequest.decode(raw), TO_JSON_FORM);
  } catch (err) {
    throw validationError(`The request body is not a protobuf ExportTraceServiceRequest: ${(err as Error).message}`, { field: 'body' });
  }
  for (const rs of (request.resourceSpans as Json[] | undefined) ?? []) {
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? []) {
      for (const span of (ss.spans as Json[] | undefined) ?? []) {
        idsToHex(span, SPAN_IDS);
        for (const link of (span.links as Json[] | undefined) ?? []) idsToHex(link, LINK_IDS);
      }
    }
  }
  return request;
}

/** The JSON `ExportTraceServiceResponse` the handler returns → protobuf bytes. */
export function encodeOtlpTraceResponse(body: unknown): Buffer {
  const message = traceService.ExportTraceServiceResponse.fromObject(body as Json);
  return Buffer.from(traceService.ExportTraceServiceResponse.encode(message).finish());
}

/** Test and tooling side: the OTLP JSON form → protobuf request bytes (ids in hex). */
export function encodeOtlpTraceRequest(json: Json): Buffer {
  const copy = structuredClone(json);
  for (const rs of (copy.resourceSpans as Json[] | undefined) ?? []) {
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? []) {
      for (const span of (ss.spans as Json[] | undefined) ?? []) {
        for (const key of SPAN_IDS) if (typeof span[key] === 'string') span[key] = Buffer.from(span[key] as string, 'hex').toString('base64');
      }
    }
  }
  return Buffer.from(traceService.ExportTraceServiceRequest.encode(traceService.ExportTraceServiceRequest.fromObject(copy)).finish());
}

/** Test side: protobuf response bytes → JSON form. */
export function decodeOtlpTraceResponse(raw: Uint8Array): Json {
  return traceService.ExportTraceServiceResponse.toObject(traceService.ExportTraceServiceResponse.decode(raw), TO_JSON_FORM);
}
