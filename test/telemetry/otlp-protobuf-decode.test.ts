/**
 * decodeOtlpTraceRequest reads protobuf straight into the OTLP JSON form with the protobufjs
 * Reader. This pins it to what it replaced, the generated decode + toObject (longs as String,
 * bytes as base64) + base64 → hex ids, kept below as the reference: the same JSON form for any
 * body either can read, and the same 400 (message and details) for any body neither can.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createRequire } from 'node:module';
import protobuf from 'protobufjs/minimal.js';
import { decodeOtlpTraceRequest } from '../../src/telemetry/otlp-protobuf.js';
import { AppError, validationError } from '../../src/kernel/errors.js';

type Json = Record<string, unknown>;
interface ProtoMessageType {
  decode(data: Uint8Array): object;
  toObject(message: object, options: Record<string, unknown>): Json;
  fromObject(object: Json): object;
  encode(message: object): { finish(): Uint8Array };
}
const requireCjs = createRequire(import.meta.url);
const ExportTraceServiceRequest = (
  requireCjs('@opentelemetry/otlp-transformer/build/src/generated/root.js') as {
    opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtoMessageType } } } } };
  }
).opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** The previous decodeOtlpTraceRequest, verbatim. */
const TO_JSON_FORM = { longs: String, enums: Number, bytes: String, defaults: false, arrays: false, objects: false, oneofs: false };
function idsToHex(holder: Json, keys: readonly string[]): void {
  for (const key of keys) {
    const value = holder[key];
    if (typeof value === 'string') holder[key] = Buffer.from(value, 'base64').toString('hex');
  }
}
function referenceDecode(raw: Uint8Array): Json {
  let request: Json;
  try {
    request = ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(raw), TO_JSON_FORM);
  } catch (err) {
    throw validationError(`The request body is not a protobuf ExportTraceServiceRequest: ${(err as Error).message}`, { field: 'body' });
  }
  for (const rs of (request.resourceSpans as Json[] | undefined) ?? []) {
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? []) {
      for (const span of (ss.spans as Json[] | undefined) ?? []) {
        idsToHex(span, ['traceId', 'spanId', 'parentSpanId']);
        for (const link of (span.links as Json[] | undefined) ?? []) idsToHex(link, ['traceId', 'spanId']);
      }
    }
  }
  return request;
}

type Outcome = { ok: true; json: Json } | { ok: false; code: string; message: string; details: unknown };
function outcome(decode: (raw: Uint8Array) => Json, raw: Uint8Array): Outcome {
  try {
    return { ok: true, json: decode(raw) };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return { ok: false, code: err.code, message: err.message, details: err.options.details };
  }
}
/**
 * A Buffer body (what the HTTP layer passes) and a plain Uint8Array: protobufjs reads them with
 * different Readers, which differ themselves (a string running past the end is cut short in a
 * Buffer, an error in a Uint8Array), so each is compared with the reference on the same input.
 */
function expectSameOutcome(raw: Uint8Array): Outcome {
  const buffer = Buffer.from(raw);
  const expected = outcome(referenceDecode, buffer);
  expect(outcome(decodeOtlpTraceRequest, buffer)).toStrictEqual(expected);
  const plain = new Uint8Array(raw);
  expect(outcome(decodeOtlpTraceRequest, plain)).toStrictEqual(outcome(referenceDecode, plain));
  return expected;
}

const U64 = 2n ** 64n;
/** Values around the edges the conversion to text treats differently: 2^53 (exact numbers), 2^63 (sign), 2^64. */
const near = (edges: bigint[], min: bigint, max: bigint) =>
  fc.tuple(fc.constantFrom(...edges), fc.integer({ min: -3, max: 3 })).map(([edge, offset]) => edge + BigInt(offset)).filter((v) => v >= min && v <= max);
const uint64 = fc.oneof(fc.bigInt({ min: 0n, max: U64 - 1n }), fc.bigInt({ min: 0n, max: 2n ** 53n + 10n }), near([0n, 2n ** 32n, 2n ** 53n, 2n ** 63n, U64 - 1n], 0n, U64 - 1n));
const int64 = fc.oneof(
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  fc.integer({ min: -1000, max: 1000 }).map(BigInt),
  near([0n, 2n ** 32n, -(2n ** 32n), 2n ** 53n, -(2n ** 53n), 2n ** 63n - 1n, -(2n ** 63n)], -(2n ** 63n), 2n ** 63n - 1n),
);
const Long = protobuf.util.Long as unknown as { fromString(text: string, unsigned: boolean): unknown };
const ulong = uint64.map((v) => Long.fromString(v.toString(), true));
const slong = int64.map((v) => Long.fromString(v.toString(), false));
const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.constantFrom('', 'gen_ai.request.model', 'gpt-4o'));
const bytes = (lengths: number[]) => fc.oneof(...lengths.map((n) => fc.uint8Array({ minLength: n, maxLength: n })), fc.uint8Array({ maxLength: 20 }));
const id16 = bytes([16, 0]);
const id8 = bytes([8, 0]);
const count = fc.nat({ max: 2 ** 32 - 1 });
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 3 });

/** AnyValue of every kind, arrays and kvlists nested a few levels (deeper than the schema allows). */
const { anyValue } = fc.letrec<{ anyValue: Json; keyValue: Json }>((tie) => ({
  anyValue: fc.oneof(
    { maxDepth: 3, depthIdentifier: 'any' },
    fc.constant({}),
    fc.record({ stringValue: text }),
    fc.record({ boolValue: fc.boolean() }),
    fc.record({ intValue: slong }),
    fc.record({ doubleValue: fc.double() }),
    fc.record({ bytesValue: fc.uint8Array({ maxLength: 10 }) }),
    fc.record({ arrayValue: fc.record({ values: opt(fc.array(tie('anyValue'), { maxLength: 3 })) }, { requiredKeys: [] }) }),
    fc.record({ kvlistValue: fc.record({ values: opt(fc.array(tie('keyValue'), { maxLength: 3 })) }, { requiredKeys: [] }) }),
  ),
  keyValue: fc.record({ key: text, value: tie('anyValue') }, { requiredKeys: [] }),
}));
const keyValue = fc.record({ key: text, value: anyValue }, { requiredKeys: [] });
const attributes = fc.array(keyValue, { maxLength: 4 });

const span = fc.record(
  {
    traceId: id16,
    spanId: id8,
    traceState: text,
    parentSpanId: id8,
    flags: count,
    name: text,
    kind: fc.integer({ min: -2, max: 7 }),
    startTimeUnixNano: ulong,
    endTimeUnixNano: ulong,
    attributes,
    droppedAttributesCount: count,
    events: fc.array(fc.record({ timeUnixNano: ulong, name: text, attributes, droppedAttributesCount: count }, { requiredKeys: [] }), { maxLength: 3 }),
    droppedEventsCount: count,
    links: fc.array(fc.record({ traceId: id16, spanId: id8, traceState: text, attributes, droppedAttributesCount: count, flags: count }, { requiredKeys: [] }), { maxLength: 2 }),
    droppedLinksCount: count,
    status: fc.record({ message: text, code: fc.integer({ min: -1, max: 3 }) }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
);
const entityRef = fc.record({ schemaUrl: text, type: text, idKeys: fc.array(text, { maxLength: 2 }), descriptionKeys: fc.array(text, { maxLength: 2 }) }, { requiredKeys: [] });
const request = fc.record(
  {
    resourceSpans: fc.array(
      fc.record(
        {
          resource: fc.record({ attributes, droppedAttributesCount: count, entityRefs: fc.array(entityRef, { maxLength: 2 }) }, { requiredKeys: [] }),
          scopeSpans: fc.array(
            fc.record(
              {
                scope: fc.record({ name: text, version: text, attributes, droppedAttributesCount: count }, { requiredKeys: [] }),
                spans: fc.array(span, { maxLength: 4 }),
                schemaUrl: text,
              },
              { requiredKeys: [] },
            ),
            { maxLength: 3 },
          ),
          schemaUrl: text,
        },
        { requiredKeys: [] },
      ),
      { maxLength: 3 },
    ),
  },
  { requiredKeys: [] },
);
const encode = (message: Json) => ExportTraceServiceRequest.encode(ExportTraceServiceRequest.fromObject(message)).finish();

/**
 * Any protobuf wire data: fields numbered like the OTLP messages' (1-17) with any wire type, so a
 * known field can arrive with the wrong type, an unknown one is skipped, and nested messages nest.
 */
type WireField = { no: number; type: 'varint'; value: bigint } | { no: number; type: 'fixed64'; value: bigint } | { no: number; type: 'fixed32'; value: number } | { no: number; type: 'bytes'; value: Uint8Array } | { no: number; type: 'message'; value: WireField[] } | { no: number; type: 'group'; value: WireField[] };
const fieldNo = fc.oneof(fc.integer({ min: 1, max: 17 }), fc.integer({ min: 1, max: 2 ** 29 - 1 }));
const { message: wireMessage } = fc.letrec<{ message: WireField[]; field: WireField }>((tie) => ({
  message: fc.array(tie('field'), { maxLength: 5 }),
  field: fc.oneof(
    { maxDepth: 5, depthIdentifier: 'wire' },
    fc.record({ no: fieldNo, type: fc.constant('varint' as const), value: fc.bigInt({ min: 0n, max: U64 - 1n }) }),
    fc.record({ no: fieldNo, type: fc.constant('fixed64' as const), value: uint64 }),
    fc.record({ no: fieldNo, type: fc.constant('fixed32' as const), value: count }),
    fc.record({ no: fieldNo, type: fc.constant('bytes' as const), value: fc.oneof(fc.uint8Array({ maxLength: 17 }), text.map((s) => new Uint8Array(Buffer.from(s)))) }),
    fc.record({ no: fieldNo, type: fc.constant('message' as const), value: tie('message') }),
    fc.record({ no: fieldNo, type: fc.constant('group' as const), value: tie('message') }),
  ),
}));
function writeFields(writer: protobuf.Writer, fields: WireField[]): protobuf.Writer {
  for (const f of fields) {
    switch (f.type) {
      case 'varint':
        writer.uint32((f.no << 3) | 0).uint64(f.value.toString());
        break;
      case 'fixed64':
        writer.uint32((f.no << 3) | 1).fixed64(f.value.toString());
        break;
      case 'fixed32':
        writer.uint32((f.no << 3) | 5).fixed32(f.value);
        break;
      case 'bytes':
        writer.uint32((f.no << 3) | 2).bytes(f.value);
        break;
      case 'message':
        writeFields(writer.uint32((f.no << 3) | 2).fork(), f.value).ldelim();
        break;
      case 'group':
        writeFields(writer.uint32((f.no << 3) | 3), f.value).uint32((f.no << 3) | 4);
        break;
    }
  }
  return writer;
}
const wireBytes = wireMessage.map((fields) => writeFields(protobuf.Writer.create(), fields).finish());

describe('decodeOtlpTraceRequest (protobuf → OTLP JSON form) matches decode + toObject', () => {
  it('requests of every field, AnyValue kind, nesting, missing fields and 64-bit value (above 2^53, negative)', () => {
    let readable = 0;
    fc.assert(
      fc.property(request, (message) => {
        if (expectSameOutcome(encode(message)).ok) readable++;
      }),
      { numRuns: 1500, seed: 21 },
    );
    expect(readable).toBe(1500);
  });

  it('the same requests with unknown fields (every wire type) appended at the top level', () => {
    fc.assert(
      fc.property(request, wireMessage, (message, extra) => {
        const extraFields = extra.map((f) => ({ ...f, no: f.no + 100 }));
        expectSameOutcome(Buffer.concat([encode(message), writeFields(protobuf.Writer.create(), extraFields).finish()]));
      }),
      { numRuns: 300, seed: 22 },
    );
  });

  it('any wire data in OTLP field numbers: wrong wire types, unknown fields, repeated singular fields, groups', () => {
    let readable = 0;
    fc.assert(
      fc.property(wireBytes, (raw) => {
        if (expectSameOutcome(raw).ok) readable++;
      }),
      { numRuns: 3000, seed: 23 },
    );
    // Both kinds of outcome were exercised.
    expect(readable).toBeGreaterThan(100);
    expect(readable).toBeLessThan(2900);
  });

  it('truncated, corrupted and random bodies fail with the same 400 (message, details)', () => {
    const failures = new Set<string>();
    fc.assert(
      fc.property(request, fc.nat(), fc.nat(), fc.integer({ min: 0, max: 255 }), (message, cut, at, byte) => {
        const raw = encode(message);
        const truncated = raw.subarray(0, raw.length === 0 ? 0 : cut % raw.length);
        const corrupted = Uint8Array.from(raw);
        if (corrupted.length) corrupted[at % corrupted.length] = byte;
        for (const body of [truncated, corrupted]) {
          const result = expectSameOutcome(body);
          if (!result.ok) failures.add(result.message.replace(/[0-9]+/g, 'N'));
        }
      }),
      { numRuns: 1500, seed: 24 },
    );
    fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), (raw) => void expectSameOutcome(raw)), { numRuns: 1500, seed: 25 });
    expect([...failures].some((m) => m.includes('index out of range'))).toBe(true);
  });

  it('64-bit values at the edges: fixed64 times and int64 attribute values', () => {
    const edges = [0n, 1n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, 2n ** 63n, U64 - 1n];
    for (const edge of [...edges, ...edges.map((v) => -v)]) {
      const signed = BigInt.asIntN(64, edge);
      const unsigned = BigInt.asUintN(64, edge);
      const message = {
        resourceSpans: [{ scopeSpans: [{ spans: [{ startTimeUnixNano: Long.fromString(unsigned.toString(), true), attributes: [{ key: 'n', value: { intValue: Long.fromString(signed.toString(), false) } }] }] }] }],
      };
      const result = expectSameOutcome(encode(message));
      expect(result).toMatchObject({ ok: true, json: { resourceSpans: [{ scopeSpans: [{ spans: [{ startTimeUnixNano: unsigned.toString(), attributes: [{ value: { intValue: signed.toString() } }] }] }] }] } });
    }
  });

  it('fixed cases: empty body, empty resourceSpans, non-protobuf text, a bad varint, duplicate oneof members', () => {
    expect(expectSameOutcome(new Uint8Array())).toStrictEqual({ ok: true, json: {} });
    expect(expectSameOutcome(encode({ resourceSpans: [{}] }))).toStrictEqual({ ok: true, json: { resourceSpans: [{}] } });
    expect(expectSameOutcome(Buffer.from('{"resourceSpans":[]}'))).toMatchObject({ ok: false, code: 'VALIDATION_ERROR', details: { field: 'body' } });
    expect(expectSameOutcome(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]))).toMatchObject({ ok: false, code: 'VALIDATION_ERROR' });
    // AnyValue with stringValue and intValue: both kept, so the schema's maxProperties refuses it.
    const kv = writeFields(protobuf.Writer.create(), [
      { no: 1, type: 'bytes', value: Buffer.from('k') },
      { no: 2, type: 'message', value: [{ no: 1, type: 'bytes', value: Buffer.from('v') }, { no: 3, type: 'varint', value: U64 - 1n }] },
    ]).finish();
    const raw = writeFields(protobuf.Writer.create(), [{ no: 1, type: 'message', value: [{ no: 1, type: 'message', value: [{ no: 1, type: 'bytes', value: kv }] }] }]).finish();
    expect(expectSameOutcome(raw)).toStrictEqual({ ok: true, json: { resourceSpans: [{ resource: { attributes: [{ key: 'k', value: { stringValue: 'v', intValue: '-1' } }] } }] } });
  });
});
