/** Date and time fields of the console (web/console/shared/local-time.ts): local input ↔ ISO UTC, expiry checks. */
import { describe, expect, it } from 'vitest';
import { expiryProblem, isoToLocalInput, localInputToIso } from '../../web/console/shared/local-time.js';

describe('local date and time fields', () => {
  it('reads a local date and time in a zone as an ISO instant in UTC', () => {
    expect(localInputToIso('2026-12-31T23:59', 'UTC')).toBe('2026-12-31T23:59:00.000Z');
    expect(localInputToIso('2026-12-31T23:59', 'Europe/Paris')).toBe('2026-12-31T22:59:00.000Z');
    expect(localInputToIso('2026-07-01T09:00', 'Europe/Paris')).toBe('2026-07-01T07:00:00.000Z');
    expect(localInputToIso('2026-12-07T10:00', 'America/New_York')).toBe('2026-12-07T15:00:00.000Z');
    expect(localInputToIso('2027-01-01T00:00', 'Asia/Kolkata')).toBe('2026-12-31T18:30:00.000Z');
    expect(localInputToIso('2026-06-15T12:00:30', 'Australia/Adelaide')).toBe('2026-06-15T02:30:30.000Z');
    // Across the date line: Kiritimati is UTC+14.
    expect(localInputToIso('2026-01-01T00:00', 'Pacific/Kiritimati')).toBe('2025-12-31T10:00:00.000Z');
  });

  it('reads a skipped local time forward and a repeated one as its first occurrence', () => {
    // Paris, 29 March 2026: 02:00 → 03:00. 02:30 does not exist; read as 03:30 local (01:30Z).
    expect(localInputToIso('2026-03-29T02:30', 'Europe/Paris')).toBe('2026-03-29T01:30:00.000Z');
    expect(localInputToIso('2026-03-29T03:30', 'Europe/Paris')).toBe('2026-03-29T01:30:00.000Z');
    expect(localInputToIso('2026-03-29T01:59', 'Europe/Paris')).toBe('2026-03-29T00:59:00.000Z');
    // Paris, 25 October 2026: 03:00 → 02:00. 02:30 happens at 00:30Z (summer time) and 01:30Z.
    expect(localInputToIso('2026-10-25T02:30', 'Europe/Paris')).toBe('2026-10-25T00:30:00.000Z');
    expect(localInputToIso('2026-10-25T03:30', 'Europe/Paris')).toBe('2026-10-25T02:30:00.000Z');
  });

  it('refuses what is no calendar date and time', () => {
    for (const bad of ['', '2026-02-30T10:00', '2026-13-01T10:00', '2026-12-31T24:00', '2026-12-31T23:60', '2026-12-31', '31/12/2026 23:59', '2026-12-31 23:59', 'tomorrow']) {
      expect(localInputToIso(bad, 'Europe/Paris'), bad).toBeUndefined();
    }
    expect(localInputToIso('2028-02-29T12:00', 'UTC')).toBe('2028-02-29T12:00:00.000Z');
  });

  it('shows an instant as a local field value, and back', () => {
    expect(isoToLocalInput('2026-12-31T22:59:00Z', 'Europe/Paris')).toBe('2026-12-31T23:59');
    expect(isoToLocalInput('2026-12-31T18:30:00.000Z', 'Asia/Kolkata')).toBe('2027-01-01T00:00');
    expect(isoToLocalInput('2026-10-25T01:30:00Z', 'Europe/Paris')).toBe('2026-10-25T02:30');
    expect(isoToLocalInput(null, 'UTC')).toBe('');
    expect(isoToLocalInput('not a date', 'UTC')).toBe('');
    for (const zone of ['UTC', 'Europe/Paris', 'America/Los_Angeles', 'Asia/Kathmandu']) {
      for (const iso of ['2026-01-15T08:45:00.000Z', '2026-07-04T23:15:00.000Z']) expect(localInputToIso(isoToLocalInput(iso, zone), zone), `${zone} ${iso}`).toBe(iso);
    }
  });

  it('says what is wrong with an expiry', () => {
    const now = new Date('2026-12-07T10:00:00Z');
    expect(expiryProblem('', now, 'Europe/Paris')).toBeUndefined();
    expect(expiryProblem('2026-12-07T11:01', now, 'Europe/Paris')).toBeUndefined();
    // 11:00 in Paris is 10:00Z: now, so not in the future.
    expect(expiryProblem('2026-12-07T11:00', now, 'Europe/Paris')).toMatch(/in the past/);
    expect(expiryProblem('2025-01-01T00:00', now, 'UTC')).toMatch(/in the past/);
    expect(expiryProblem('2026-02-30T10:00', now, 'UTC')).toMatch(/Enter a date and a time/);
  });
});
