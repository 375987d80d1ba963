/**
 * What a delivery to Kassa's Stripe event endpoint must be before anything is applied: signed with
 * the endpoint's secret within Stripe's tolerance of Kassa's clock (both ways), and an event Kassa
 * can read (a JSON object with an id, a type, a creation time and `data.object`). Anything else is
 * a 400 and is neither applied nor remembered. Stripe's own deliveries always pass: every attempt
 * (a retry, a resend from the Dashboard) is signed afresh, and Stripe's events have these fields.
 */
import Stripe from 'stripe';
import { validationError } from '../kernel/errors.js';

/** Stripe's default tolerance (docs/card-processors.md): a delivery signed more than 5 minutes from Kassa's now, either way, is refused. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** stripe-node's message for a timestamp older than the tolerance (any other failure is the signature's). */
const SDK_TOO_OLD = 'Timestamp outside the tolerance zone';

/** Ids as Stripe writes them (`evt_…`, `cs_…`, `pi_…`); bounded, so a signed oddity cannot reach the database or a URL path. */
const STRIPE_ID = /^[A-Za-z0-9_]{1,255}$/;
const EVENT_TYPE = /^[a-z0-9_.]{1,255}$/;
/** Seconds since the epoch up to the year 9999, so `created` always makes a Date. */
const MAX_SECONDS = 253402300799;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The event in a delivery, verified with the SDK (`constructEvent`) against `now`, Kassa's clock.
 * stripe-node takes the time of receipt in milliseconds and checks only that the signature is not
 * older than the tolerance; a timestamp further ahead of Kassa's clock than the tolerance is
 * refused here. `handledTypes`: the types whose `data.object` Kassa reads back by its id.
 */
export function verifiedStripeEvent(
  stripe: Stripe,
  input: { payload: Buffer; signature: string | undefined; secret: string; now: Date; handledTypes: ReadonlySet<string> },
): Stripe.Event {
  const nowMs = input.now.getTime();
  let parsed: unknown;
  try {
    parsed = stripe.webhooks.constructEvent(input.payload, input.signature ?? '', input.secret, SIGNATURE_TOLERANCE_SECONDS, undefined, nowMs);
  } catch (err) {
    if (err instanceof Stripe.errors.StripeSignatureVerificationError) {
      if (err.message === SDK_TOO_OLD) throw tooFar('old');
      throw validationError('The Stripe-Signature header does not verify this payload with the endpoint secret');
    }
    throw validationError('The payload is not a Stripe event (not JSON)');
  }
  const signedAt = signatureTimestamp(input.signature!);
  // `t=abc` parses to NaN, which no age comparison refuses; the HMAC alone does not make it fresh.
  if (!Number.isSafeInteger(signedAt)) throw validationError('The Stripe-Signature timestamp is not a number of seconds');
  if (signedAt - Math.floor(nowMs / 1000) > SIGNATURE_TOLERANCE_SECONDS) throw tooFar('ahead');
  return applicableEvent(parsed, input.handledTypes);
}

function tooFar(direction: 'old' | 'ahead') {
  return validationError(
    `The Stripe-Signature timestamp is more than ${SIGNATURE_TOLERANCE_SECONDS} seconds ${direction === 'old' ? 'old' : "ahead of this server's clock"} (Stripe's tolerance): ` +
      'a replayed or delayed delivery is not applied; Stripe signs each retry afresh',
  );
}

/**
 * The header's timestamp as stripe-node reads it (the last `t=`, parsed as an integer), which is
 * the one its signature check verified (the signed content is `{t}.{payload}`).
 */
function signatureTimestamp(header: string): number {
  let timestamp = -1;
  for (const item of header.split(',')) {
    const [key, value] = item.split('=');
    if (key === 't') timestamp = parseInt(value!, 10);
  }
  return timestamp;
}

/** A verified payload that is an event Kassa can read, or a 400 naming what it lacks. */
function applicableEvent(parsed: unknown, handledTypes: ReadonlySet<string>): Stripe.Event {
  if (!isObject(parsed)) throw validationError('The payload is not a Stripe event: it must be one JSON object');
  const { id, type, created, data, request } = parsed;
  if (typeof id !== 'string' || !STRIPE_ID.test(id)) throw validationError('The Stripe event has no valid id');
  if (typeof type !== 'string' || !EVENT_TYPE.test(type)) throw validationError('The Stripe event has no valid type');
  if (typeof created !== 'number' || !Number.isSafeInteger(created) || created < 0 || created > MAX_SECONDS) {
    throw validationError('The Stripe event has no valid created time');
  }
  if (request != null && (!isObject(request) || (request.id != null && typeof request.id !== 'string'))) {
    throw validationError('The Stripe event has an invalid request');
  }
  if (!isObject(data) || !isObject(data.object)) throw validationError('The Stripe event has no data.object');
  const objectId = data.object.id;
  if (handledTypes.has(type) && (typeof objectId !== 'string' || !STRIPE_ID.test(objectId))) {
    throw validationError(`The Stripe event's data.object has no valid id (a ${type} names the object Kassa reads back)`);
  }
  return parsed as unknown as Stripe.Event;
}
