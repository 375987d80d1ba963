/**
 * OTLP/HTTP protobuf (`application/x-protobuf`) ⇄ the OTLP JSON form the contract validates
 * (openapi/telemetry.yaml, ingestOtlpTraces). Encoding uses the protobufjs code that OpenTelemetry
 * JS generates from the official opentelemetry-proto definitions (@opentelemetry/otlp-transformer,
 * pinned: the module is reached by path); decoding reads the same messages with protobufjs's
 * Reader, by the field numbers of that generated code. The pin holds the two together: after an
 * upgrade, test/telemetry/otlp-protobuf-decode.test.ts (whose reference is the generated decode)
 * says whether a field was added.
 */
import { createRequire } from 'node:module';
import protobuf from 'protobufjs/minimal.js';
import { validationError } from '../kernel/errors.js';

const { Reader } = protobuf;
type ProtoReader = protobuf.Reader;

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

const SPAN_IDS = ['traceId', 'spanId', 'parentSpanId'] as const;

/**
 * A protobuf `ExportTraceServiceRequest` → its OTLP JSON form; a body protobuf cannot read is 400.
 * Read straight into the JSON form with the protobufjs Reader rather than decode + toObject: no
 * message objects, and no Long → decimal, bytes → base64 → hex round trips (what it saves:
 * docs/benchmarks.md). Each reader below does what the generated `decode` of its message does, the
 * same Reader calls in the same order (field number only, wire type unchecked, unknown fields
 * skipped, a repeated singular field's last value kept), so a bad body fails at the same byte with
 * the same message; test/telemetry/otlp-protobuf-decode.test.ts pins it to decode + toObject.
 */
export function decodeOtlpTraceRequest(raw: Uint8Array): Json {
  try {
    const reader = Reader.create(raw);
    const request: Json = {};
    let resourceSpans: Json[] | undefined;
    while (reader.pos < reader.len) {
      const tag = reader.uint32();
      if (tag >>> 3 === 1) (resourceSpans ??= []).push(readResourceSpans(reader, reader.uint32()));
      else reader.skipType(tag & 7);
    }
    if (resourceSpans) request.resourceSpans = resourceSpans;
    return request;
  } catch (err) {
    throw validationError(`The request body is not a protobuf ExportTraceServiceRequest: ${(err as Error).message}`, { field: 'body' });
  }
}

/** fixed64 as toObject writes it (Long.prototype.toString of the unsigned Long; a number without the long package). */
function unsignedDecimal(value: protobuf.Long | number): string {
  if (typeof value === 'number') return String(value);
  const high = value.high >>> 0;
  const low = value.low >>> 0;
  if (high < 0x200000) return String(high * 4294967296 + low);
  return ((BigInt(high) << 32n) | BigInt(low)).toString();
}

/** int64 as toObject writes it (Long.prototype.toString of the signed Long; a number without the long package). */
function signedDecimal(value: protobuf.Long | number): string {
  if (typeof value === 'number') return String(value);
  const high = value.high | 0;
  const low = value.low >>> 0;
  if (high >= -0x200000 && high < 0x200000) return String(high * 4294967296 + low);
  return BigInt.asIntN(64, (BigInt(high >>> 0) << 32n) | BigInt(low)).toString();
}

/** Reader.bytes() is a Buffer view for a Buffer body, a Uint8Array otherwise. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** OTLP JSON writes trace and span ids as hex, other bytes as base64. */
function readHex(reader: ProtoReader): string {
  return asBuffer(reader.bytes()).toString('hex');
}

function readResourceSpans(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let scopeSpans: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.resource = readResource(reader, reader.uint32());
        break;
      case 2:
        (scopeSpans ??= []).push(readScopeSpans(reader, reader.uint32()));
        break;
      case 3:
        out.schemaUrl = reader.string();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (scopeSpans) out.scopeSpans = scopeSpans;
  return out;
}

function readResource(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let attributes: Json[] | undefined;
  let entityRefs: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        (attributes ??= []).push(readKeyValue(reader, reader.uint32()));
        break;
      case 2:
        out.droppedAttributesCount = reader.uint32();
        break;
      case 3:
        (entityRefs ??= []).push(readEntityRef(reader, reader.uint32()));
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (attributes) out.attributes = attributes;
  if (entityRefs) out.entityRefs = entityRefs;
  return out;
}

function readEntityRef(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let idKeys: string[] | undefined;
  let descriptionKeys: string[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.schemaUrl = reader.string();
        break;
      case 2:
        out.type = reader.string();
        break;
      case 3:
        (idKeys ??= []).push(reader.string());
        break;
      case 4:
        (descriptionKeys ??= []).push(reader.string());
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (idKeys) out.idKeys = idKeys;
  if (descriptionKeys) out.descriptionKeys = descriptionKeys;
  return out;
}

function readScopeSpans(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let spans: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.scope = readScope(reader, reader.uint32());
        break;
      case 2:
        (spans ??= []).push(readSpan(reader, reader.uint32()));
        break;
      case 3:
        out.schemaUrl = reader.string();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (spans) out.spans = spans;
  return out;
}

function readScope(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let attributes: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.name = reader.string();
        break;
      case 2:
        out.version = reader.string();
        break;
      case 3:
        (attributes ??= []).push(readKeyValue(reader, reader.uint32()));
        break;
      case 4:
        out.droppedAttributesCount = reader.uint32();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (attributes) out.attributes = attributes;
  return out;
}

function readSpan(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let attributes: Json[] | undefined;
  let events: Json[] | undefined;
  let links: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.traceId = readHex(reader);
        break;
      case 2:
        out.spanId = readHex(reader);
        break;
      case 3:
        out.traceState = reader.string();
        break;
      case 4:
        out.parentSpanId = readHex(reader);
        break;
      case 16:
        out.flags = reader.fixed32();
        break;
      case 5:
        out.name = reader.string();
        break;
      case 6:
        out.kind = reader.int32();
        break;
      case 7:
        out.startTimeUnixNano = unsignedDecimal(reader.fixed64());
        break;
      case 8:
        out.endTimeUnixNano = unsignedDecimal(reader.fixed64());
        break;
      case 9:
        (attributes ??= []).push(readKeyValue(reader, reader.uint32()));
        break;
      case 10:
        out.droppedAttributesCount = reader.uint32();
        break;
      case 11:
        (events ??= []).push(readEvent(reader, reader.uint32()));
        break;
      case 12:
        out.droppedEventsCount = reader.uint32();
        break;
      case 13:
        (links ??= []).push(readLink(reader, reader.uint32()));
        break;
      case 14:
        out.droppedLinksCount = reader.uint32();
        break;
      case 15:
        out.status = readStatus(reader, reader.uint32());
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (attributes) out.attributes = attributes;
  if (events) out.events = events;
  if (links) out.links = links;
  return out;
}

function readEvent(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let attributes: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.timeUnixNano = unsignedDecimal(reader.fixed64());
        break;
      case 2:
        out.name = reader.string();
        break;
      case 3:
        (attributes ??= []).push(readKeyValue(reader, reader.uint32()));
        break;
      case 4:
        out.droppedAttributesCount = reader.uint32();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (attributes) out.attributes = attributes;
  return out;
}

function readLink(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let attributes: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.traceId = readHex(reader);
        break;
      case 2:
        out.spanId = readHex(reader);
        break;
      case 3:
        out.traceState = reader.string();
        break;
      case 4:
        (attributes ??= []).push(readKeyValue(reader, reader.uint32()));
        break;
      case 5:
        out.droppedAttributesCount = reader.uint32();
        break;
      case 6:
        out.flags = reader.fixed32();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  if (attributes) out.attributes = attributes;
  return out;
}

function readStatus(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 2:
        out.message = reader.string();
        break;
      case 3:
        out.code = reader.int32();
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  return out;
}

function readKeyValue(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.key = reader.string();
        break;
      case 2:
        out.value = readAnyValue(reader, reader.uint32());
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  return out;
}

/** Every member of the oneof that is on the wire is kept, as decode does (the schema then refuses two). */
function readAnyValue(reader: ProtoReader, length: number): Json {
  const end = reader.pos + length;
  const out: Json = {};
  while (reader.pos < end) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        out.stringValue = reader.string();
        break;
      case 2:
        out.boolValue = reader.bool();
        break;
      case 3:
        out.intValue = signedDecimal(reader.int64());
        break;
      case 4:
        out.doubleValue = reader.double();
        break;
      case 5:
        out.arrayValue = readValues(reader, reader.uint32(), readAnyValue);
        break;
      case 6:
        out.kvlistValue = readValues(reader, reader.uint32(), readKeyValue);
        break;
      case 7:
        out.bytesValue = asBuffer(reader.bytes()).toString('base64');
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  return out;
}

/** ArrayValue and KeyValueList: `repeated … values = 1`. */
function readValues(reader: ProtoReader, length: number, readItem: (reader: ProtoReader, length: number) => Json): Json {
  const end = reader.pos + length;
  const out: Json = {};
  let values: Json[] | undefined;
  while (reader.pos < end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1) (values ??= []).push(readItem(reader, reader.uint32()));
    else reader.skipType(tag & 7);
  }
  if (values) out.values = values;
  return out;
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
