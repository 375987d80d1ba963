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
 * docs/benchmarks.md). Each message below is read as the generated `decode` of it reads it, the
 * same Reader calls in the same order (field number only, wire type unchecked, unknown fields
 * skipped, a repeated singular field's last value kept), so a bad body fails at the same byte with
 * the same message; test/telemetry/otlp-protobuf-decode.test.ts pins it to decode + toObject.
 */
export function decodeOtlpTraceRequest(raw: Uint8Array): Json {
  try {
    const reader = Reader.create(raw);
    return readMessage(reader, reader.len, EXPORT_TRACE_SERVICE_REQUEST);
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

/**
 * How one field of a message is read into its JSON form. A message is its fields by number, as
 * opentelemetry-proto declares them; a number it does not list is skipped by its wire type.
 */
type FieldReader = (reader: ProtoReader, out: Json) => void;
type Message = Readonly<Record<number, FieldReader>>;

function readMessage(reader: ProtoReader, length: number, message: Message): Json {
  const end = reader.pos + length;
  const out: Json = {};
  while (reader.pos < end) {
    const tag = reader.uint32();
    const field = message[tag >>> 3];
    if (field) field(reader, out);
    else reader.skipType(tag & 7);
  }
  return out;
}

const string = (name: string): FieldReader => (reader, out) => { out[name] = reader.string(); };
const uint32 = (name: string): FieldReader => (reader, out) => { out[name] = reader.uint32(); };
const int32 = (name: string): FieldReader => (reader, out) => { out[name] = reader.int32(); };
const fixed32 = (name: string): FieldReader => (reader, out) => { out[name] = reader.fixed32(); };
/** OTLP JSON writes trace and span ids as hex, other bytes as base64. */
const hex = (name: string): FieldReader => (reader, out) => { out[name] = asBuffer(reader.bytes()).toString('hex'); };
const unixNano = (name: string): FieldReader => (reader, out) => { out[name] = unsignedDecimal(reader.fixed64()); };
const repeatedString = (name: string): FieldReader => (reader, out) => { ((out[name] ??= []) as string[]).push(reader.string()); };
/** A nested message; `message` is a thunk (resolved once) because AnyValue and KeyValue contain each other. */
const nested = (name: string, message: () => Message): FieldReader => {
  let resolved: Message | undefined;
  return (reader, out) => { out[name] = readMessage(reader, reader.uint32(), (resolved ??= message())); };
};
const repeated = (name: string, message: () => Message): FieldReader => {
  let resolved: Message | undefined;
  return (reader, out) => { ((out[name] ??= []) as Json[]).push(readMessage(reader, reader.uint32(), (resolved ??= message()))); };
};

/** Every member of the oneof that is on the wire is kept, as decode does (the schema then refuses two). */
const ANY_VALUE: Message = {
  1: string('stringValue'),
  2: (reader, out) => { out.boolValue = reader.bool(); },
  3: (reader, out) => { out.intValue = signedDecimal(reader.int64()); },
  4: (reader, out) => { out.doubleValue = reader.double(); },
  5: nested('arrayValue', () => ARRAY_VALUE),
  6: nested('kvlistValue', () => KEY_VALUE_LIST),
  7: (reader, out) => { out.bytesValue = asBuffer(reader.bytes()).toString('base64'); },
};
const KEY_VALUE: Message = { 1: string('key'), 2: nested('value', () => ANY_VALUE) };
const ARRAY_VALUE: Message = { 1: repeated('values', () => ANY_VALUE) };
const KEY_VALUE_LIST: Message = { 1: repeated('values', () => KEY_VALUE) };
const attributes = (): Message => KEY_VALUE;

const ENTITY_REF: Message = { 1: string('schemaUrl'), 2: string('type'), 3: repeatedString('idKeys'), 4: repeatedString('descriptionKeys') };
const RESOURCE: Message = { 1: repeated('attributes', attributes), 2: uint32('droppedAttributesCount'), 3: repeated('entityRefs', () => ENTITY_REF) };
const SCOPE: Message = { 1: string('name'), 2: string('version'), 3: repeated('attributes', attributes), 4: uint32('droppedAttributesCount') };
const STATUS: Message = { 2: string('message'), 3: int32('code') };
const EVENT: Message = { 1: unixNano('timeUnixNano'), 2: string('name'), 3: repeated('attributes', attributes), 4: uint32('droppedAttributesCount') };
const LINK: Message = {
  1: hex('traceId'), 2: hex('spanId'), 3: string('traceState'), 4: repeated('attributes', attributes), 5: uint32('droppedAttributesCount'), 6: fixed32('flags'),
};
const SPAN: Message = {
  1: hex('traceId'),
  2: hex('spanId'),
  3: string('traceState'),
  4: hex('parentSpanId'),
  5: string('name'),
  6: int32('kind'),
  7: unixNano('startTimeUnixNano'),
  8: unixNano('endTimeUnixNano'),
  9: repeated('attributes', attributes),
  10: uint32('droppedAttributesCount'),
  11: repeated('events', () => EVENT),
  12: uint32('droppedEventsCount'),
  13: repeated('links', () => LINK),
  14: uint32('droppedLinksCount'),
  15: nested('status', () => STATUS),
  16: fixed32('flags'),
};
const SCOPE_SPANS: Message = { 1: nested('scope', () => SCOPE), 2: repeated('spans', () => SPAN), 3: string('schemaUrl') };
const RESOURCE_SPANS: Message = { 1: nested('resource', () => RESOURCE), 2: repeated('scopeSpans', () => SCOPE_SPANS), 3: string('schemaUrl') };
const EXPORT_TRACE_SERVICE_REQUEST: Message = { 1: repeated('resourceSpans', () => RESOURCE_SPANS) };

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
