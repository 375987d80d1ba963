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

export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);
