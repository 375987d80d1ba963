/**
 * The suite's expect.poll waits long enough for a loaded 2-core machine (vitest.config.ts): its own
 * default of 1 s failed correct browser tests whose page took longer to render after a click.
 */
import { describe, expect, it } from 'vitest';

describe('expect.poll in this suite', () => {
  it('keeps polling a condition that turns true after more than vitest’s own 1 s default', async () => {
    const start = Date.now();
    await expect.poll(() => Date.now() - start >= 1_500).toBe(true);
  });
});
