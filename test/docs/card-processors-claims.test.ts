/**
 * Issue 37 §30: docs/card-processors.md's claims about refunds that fail later, read from the
 * document (as test/readme-quick-start.test.ts reads the README), so its text cannot drift from
 * what Kassa does. The behaviour itself is tested in test/processors/stripe-after-payment.test.ts
 * ('refund.failed takes the amount back out') and test/buyer-emails/refund-failed.test.ts.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8').replace(/\s+/g, ' ');

/** The text under a heading, up to the next heading of any level. */
function section(doc: string, heading: string): string {
  const start = doc.indexOf(heading);
  if (start < 0) throw new Error(`no "${heading}" section`);
  const rest = doc.slice(start + heading.length);
  const end = rest.search(/ #{2,4} /);
  return end < 0 ? rest : rest.slice(0, end);
}

describe('docs/card-processors.md on refunds that fail later', () => {
  const doc = read('docs/card-processors.md');

  it('"Not yet on Stripe" no longer lists a failed refund as left in amountRefunded', () => {
    const notYet = section(doc, '### Not yet on Stripe');
    expect(notYet).not.toMatch(/refund Stripe fails after it was made is not taken/);
    expect(notYet).toContain('*is* taken back out of `amountRefunded`');
  });

  it("the event table says what the refund events do: recorded, taken back out, announced", () => {
    const row = doc.split(' | ').find((cell) => cell.includes('a recorded refund now `failed` or `canceled`'));
    expect(row).toContain('is taken back out (a `REFUNDED` order is `PAID` again) and announced (`order.refund_failed`)');
  });

  it('docs/customer-portal.md lists the buyer e-mail about a refund that failed', () => {
    expect(read('docs/customer-portal.md')).toMatch(/\| refund failed \| a refund the buyer was told about failed/);
  });
});
