/** Every "now" in the service comes from a Clock so tests can move time without sleeping. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock tests drive by hand. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: Date | string | number = '2026-11-22T09:00:00.000Z') {
    this.current = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.current);
  }
  set(to: Date | string | number): void {
    this.current = new Date(to).getTime();
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

/**
 * The system clock shifted forward by hand: a development deployment's test clock (`TEST_CLOCK=true`,
 * the admin API's advanceTestClock). Time keeps running; the shift only grows.
 */
export class ShiftedClock implements Clock {
  private shift = 0;
  now(): Date {
    return new Date(Date.now() + this.shift);
  }
  advance(ms: number): void {
    if (!(ms > 0)) throw new RangeError('a test clock only moves forward');
    this.shift += ms;
  }
  get shiftMs(): number {
    return this.shift;
  }
}

export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
