/**
 * Deterministic trace sampling, as in OpenTelemetry probability sampling: the last 14 hex digits
 * (56 bits) of the trace id are its randomness R, and a trace is kept iff
 * R ≥ round((1 − rate) × 2^56). Every batch carrying spans of a trace decides the same way, and
 * the traces a lower rate keeps are a subset of those a higher rate keeps.
 */
const TWO_POW_56 = 2 ** 56;

export function samplingThreshold(rate: number): bigint {
  return BigInt(Math.round((1 - rate) * TWO_POW_56));
}

export function keepTrace(traceId: string, threshold: bigint): boolean {
  if (threshold === 0n) return true;
  return BigInt(`0x${traceId.slice(-14)}`) >= threshold;
}
