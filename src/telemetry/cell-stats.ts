/**
 * The contents of one metric rollup cell (a project, a minute/hour/day, a model and a vendor):
 * request and error counts, and for each distribution-valued metric its count, sum, min, max and
 * a DDSketch. Every part merges exactly, so a cell for any aligned range is the merge of finer
 * cells, and the answer for a query bucket is the merge of the cells that tile it.
 */
import { ByteReader, ByteWriter, DDSketch } from './ddsketch.js';

/** The distributions of a cell, in column order (telemetry_rollups.dist_*). */
export const DISTRIBUTIONS = ['latency', 'tokensInput', 'tokensOutput', 'tokensTotal', 'cost'] as const;
export type DistributionName = (typeof DISTRIBUTIONS)[number];
export const distributionIndex = (name: DistributionName): number => DISTRIBUTIONS.indexOf(name);

/** What one model-call span contributes to the metrics. */
export interface ModelCallSample {
  durationMs: number;
  tokensInput: number | null;
  tokensOutput: number | null;
  cost: number | null;
  isError: boolean;
}

export class Distribution {
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  readonly sketch = new DDSketch();

  add(value: number): void {
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    this.sketch.add(value);
  }

  merge(other: Distribution): void {
    if (other.count === 0) return;
    this.count += other.count;
    this.sum += other.sum;
    if (other.min < this.min) this.min = other.min;
    if (other.max > this.max) this.max = other.max;
    this.sketch.merge(other.sketch);
  }

  /** The quantile from the sketch, clamped to the exact [min, max] (which can only bring it closer). */
  quantile(q: number): number | null {
    const v = this.sketch.quantile(q);
    if (v === undefined) return null;
    return Math.min(this.max, Math.max(this.min, v));
  }

  encode(writer: ByteWriter): void {
    writer.varint(this.count);
    if (this.count === 0) return;
    writer.float64(this.sum);
    writer.float64(this.min);
    writer.float64(this.max);
    const sketch = new ByteWriter();
    this.sketch.encode(sketch);
    writer.varint(sketch.length);
    writer.bytes(sketch.toBuffer());
  }

  /** Adds an encoded distribution into this one. */
  mergeEncoded(reader: ByteReader): void {
    const count = reader.varint();
    if (count === 0) return;
    const sum = reader.float64();
    const min = reader.float64();
    const max = reader.float64();
    reader.varint(); // sketch length, only needed to skip
    this.count += count;
    this.sum += sum;
    if (min < this.min) this.min = min;
    if (max > this.max) this.max = max;
    this.sketch.mergeEncoded(reader);
  }

}

const FORMAT_VERSION = 1;

export class CellStats {
  requests = 0;
  errors = 0;
  readonly dists: Distribution[] = DISTRIBUTIONS.map(() => new Distribution());

  addSample(s: ModelCallSample): void {
    this.requests++;
    if (s.isError) this.errors++;
    this.dists[0]!.add(s.durationMs);
    if (s.tokensInput !== null) this.dists[1]!.add(s.tokensInput);
    if (s.tokensOutput !== null) this.dists[2]!.add(s.tokensOutput);
    if (s.tokensInput !== null || s.tokensOutput !== null) this.dists[3]!.add((s.tokensInput ?? 0) + (s.tokensOutput ?? 0));
    if (s.cost !== null) this.dists[4]!.add(s.cost);
  }

  merge(other: CellStats): void {
    this.requests += other.requests;
    this.errors += other.errors;
    for (let i = 0; i < this.dists.length; i++) this.dists[i]!.merge(other.dists[i]!);
  }

  /** One encoding per distribution, in DISTRIBUTIONS order (each is its own column). */
  encodeDistributions(): Buffer[] {
    return this.dists.map((d) => {
      const writer = new ByteWriter();
      writer.byte(FORMAT_VERSION);
      d.encode(writer);
      return writer.toBuffer();
    });
  }

  static decode(requests: number, errors: number, dists: Uint8Array[]): CellStats {
    const cell = new CellStats();
    cell.requests = requests;
    cell.errors = errors;
    dists.forEach((bytes, i) => mergeEncodedDistribution(bytes, cell.dists[i]!));
    return cell;
  }
}

/**
 * Merges an encoded distribution (a rollup column) into `target`; also several written one after
 * another, as a query that concatenates the column over many cells returns them.
 */
export function mergeEncodedDistribution(bytes: Uint8Array, target: Distribution): void {
  const reader = new ByteReader(bytes);
  while (reader.pos < bytes.length) {
    const version = reader.byte();
    if (version !== FORMAT_VERSION) throw new Error(`unknown rollup distribution format ${version}`);
    target.mergeEncoded(reader);
  }
}
