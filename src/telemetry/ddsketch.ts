/**
 * A compact DDSketch (Masson, Rim, Lee: "DDSketch: A Fast and Fully-Mergeable Quantile Sketch with
 * Relative-Error Guarantees", VLDB 2019) for non-negative samples.
 *
 * A positive value v goes to bin i = ceil(log_γ v) with γ = (1+α)/(1−α); the bin's
 * representative 2γ^i/(γ+1) is within relative error α of every value in (γ^(i−1), γ^i]. Zero has
 * its own exact bin. Bins are plain counts, so two sketches merge by adding counts, exactly and in
 * any order: that is what lets minute, hour and day rollups combine into any time range.
 *
 * α is 0.0099, so a quantile answered by the sketch is within 1% of the sample at the same rank
 * (see `quantile`). Storage is dense (one counter per bin between the lowest and highest used
 * index): latencies from 1 ms to 1 hour span about 770 bins.
 */

export const RELATIVE_ACCURACY = 0.0099;
const GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY);
const LOG_GAMMA = Math.log(GAMMA);
/** Smallest positive value given its own bin; smaller ones (≈ 1e-300) count as zero. */
const MIN_INDEXABLE = 1e-300;

export const binIndex = (value: number): number => Math.ceil(Math.log(value) / LOG_GAMMA);
export const binValue = (index: number): number => (2 * Math.pow(GAMMA, index)) / (GAMMA + 1);

let scratchIndex = new Float64Array(1024);
let scratchCount = new Float64Array(1024);

export class DDSketch {
  zeroCount = 0;
  count = 0;
  /** counts[k] belongs to bin index `offset + k`. */
  private counts: Float64Array = new Float64Array(0);
  private offset = 0;

  add(value: number, weight = 1): void {
    if (!(value >= 0)) throw new RangeError(`DDSketch takes non-negative samples, got ${value}`);
    this.count += weight;
    if (value < MIN_INDEXABLE) {
      this.zeroCount += weight;
      return;
    }
    this.addToBin(binIndex(value), weight);
  }

  private addToBin(index: number, weight: number): void {
    const k = index - this.offset;
    if (k >= 0 && k < this.counts.length) {
      this.counts[k]! += weight;
      return;
    }
    this.ensure(index, index);
    this.counts[index - this.offset]! += weight;
  }

  /** Grows the dense range to cover [lo, hi]. */
  private ensure(lo: number, hi: number): void {
    const length = this.counts.length;
    if (length === 0) {
      // Some headroom on both sides: neighbouring samples rarely need a second allocation.
      this.offset = lo - 16;
      this.counts = new Float64Array(hi - lo + 33);
      return;
    }
    const curLo = this.offset;
    const curHi = this.offset + length - 1;
    if (lo >= curLo && hi <= curHi) return;
    const newLo = Math.min(lo, curLo) - (lo < curLo ? 32 : 0);
    const newHi = Math.max(hi, curHi) + (hi > curHi ? 32 : 0);
    const grown = new Float64Array(newHi - newLo + 1);
    grown.set(this.counts, curLo - newLo);
    this.counts = grown;
    this.offset = newLo;
  }

  merge(other: DDSketch): void {
    if (other.count === 0) return;
    this.count += other.count;
    this.zeroCount += other.zeroCount;
    const src = other.counts;
    let first = -1;
    let last = -1;
    for (let k = 0; k < src.length; k++) {
      if (src[k] !== 0) {
        if (first < 0) first = k;
        last = k;
      }
    }
    if (first < 0) return;
    this.ensure(other.offset + first, other.offset + last);
    const shift = other.offset - this.offset;
    for (let k = first; k <= last; k++) this.counts[k + shift]! += src[k]!;
  }

  /**
   * The value at rank floor(q·(count−1)) of the sorted samples (the lower nearest rank), within
   * relative error α. Undefined for an empty sketch.
   */
  quantile(q: number): number | undefined {
    if (this.count === 0) return undefined;
    const rank = Math.floor(q * (this.count - 1));
    if (rank < this.zeroCount) return 0;
    let seen = this.zeroCount;
    const counts = this.counts;
    for (let k = 0; k < counts.length; k++) {
      seen += counts[k]!;
      if (seen > rank) return binValue(this.offset + k);
    }
    // Only reachable through float drift in huge weights: the highest bin is the answer.
    for (let k = counts.length - 1; k >= 0; k--) if (counts[k] !== 0) return binValue(this.offset + k);
    return 0;
  }

  /** Compact encoding: zero count, bin count, then (index delta, count) pairs as varints. */
  encode(writer: ByteWriter): void {
    writer.varint(this.zeroCount);
    const counts = this.counts;
    let bins = 0;
    for (let k = 0; k < counts.length; k++) if (counts[k] !== 0) bins++;
    writer.varint(bins);
    let previous: number | undefined;
    for (let k = 0; k < counts.length; k++) {
      const c = counts[k]!;
      if (c === 0) continue;
      const index = this.offset + k;
      if (previous === undefined) writer.zigzag(index);
      else writer.varint(index - previous);
      writer.varint(c);
      previous = index;
    }
  }

  /** Adds an encoded sketch (as written by `encode`) into this one. */
  mergeEncoded(reader: ByteReader): void {
    const zero = reader.varint();
    const bins = reader.varint();
    this.zeroCount += zero;
    this.count += zero;
    if (bins === 0) return;
    // Decode first, grow the dense range once, then add: queries merge hundreds of these.
    if (scratchIndex.length < bins) {
      scratchIndex = new Float64Array(bins * 2);
      scratchCount = new Float64Array(bins * 2);
    }
    let index = 0;
    for (let b = 0; b < bins; b++) {
      index = b === 0 ? reader.zigzag() : index + reader.varint();
      scratchIndex[b] = index;
      scratchCount[b] = reader.varint();
    }
    this.ensure(scratchIndex[0]!, scratchIndex[bins - 1]!);
    const counts = this.counts;
    const offset = this.offset;
    for (let b = 0; b < bins; b++) {
      counts[scratchIndex[b]! - offset]! += scratchCount[b]!;
      this.count += scratchCount[b]!;
    }
  }

  static decode(reader: ByteReader): DDSketch {
    const sketch = new DDSketch();
    sketch.mergeEncoded(reader);
    return sketch;
  }
}

/** Growable byte buffer with LEB128 varints and little-endian doubles. */
export class ByteWriter {
  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buf.subarray(0, this.length));
    this.buf = grown;
    this.view = new DataView(grown.buffer);
  }

  byte(value: number): void {
    this.reserve(1);
    this.buf[this.length++] = value;
  }

  /** Non-negative integers up to 2^53. */
  varint(value: number): void {
    if (!(value >= 0) || !Number.isSafeInteger(value)) throw new RangeError(`varint out of range: ${value}`);
    this.reserve(8);
    let v = value;
    while (v >= 0x80) {
      this.buf[this.length++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.length++] = v;
  }

  zigzag(value: number): void {
    this.varint(value >= 0 ? value * 2 : -value * 2 - 1);
  }

  float64(value: number): void {
    this.reserve(8);
    this.view.setFloat64(this.length, value, true);
    this.length += 8;
  }

  bytes(data: Uint8Array): void {
    this.reserve(data.length);
    this.buf.set(data, this.length);
    this.length += data.length;
  }

  toBuffer(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.length));
  }
}

export class ByteReader {
  pos = 0;
  private readonly view: DataView;
  constructor(readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  byte(): number {
    if (this.pos >= this.buf.length) throw new RangeError('truncated encoding');
    return this.buf[this.pos++]!;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * scale;
      if (b < 0x80) return result;
      scale *= 0x80;
    }
  }

  zigzag(): number {
    const v = this.varint();
    return v % 2 === 0 ? v / 2 : -(v + 1) / 2;
  }

  float64(): number {
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }

  skip(n: number): void {
    this.pos += n;
  }
}
