/** Settings → Organization's card processor card (web/console/routes/settings/card-processor.ts). */
import { describe, expect, it } from 'vitest';
import { cardProcessorFields } from '../../web/console/routes/settings/card-processor.js';

const at = (iso: string) => `at ${iso}`;
const binding = { orgId: 'ORG_x', accountId: 'acct_1234567890', boundAt: '2026-11-01T10:00:00.000Z' };

describe('cardProcessorFields', () => {
  it('the sandbox says that no money moves', () => {
    expect(cardProcessorFields({ processor: 'sandbox', connectedAccount: null }, at)).toEqual([['Processor', 'Sandbox: test cards only, no money moves']]);
  });
  it('Stripe without a Connect account: the platform keeps the payments', () => {
    expect(cardProcessorFields({ processor: 'stripe', connectedAccount: { ...binding, accountId: null, boundAt: null, state: null } }, at)).toEqual([
      ['Processor', 'Stripe'],
      ['Connect account', "None bound: payments go to the platform's Stripe account"],
    ]);
    expect(cardProcessorFields({ processor: 'stripe', connectedAccount: null }, at)[1]![0]).toBe('Connect account');
  });
  it('a bound account Stripe has not reported on yet', () => {
    expect(cardProcessorFields({ processor: 'stripe', connectedAccount: { ...binding, state: null } }, at)).toEqual([
      ['Processor', 'Stripe'],
      ['Connect account', 'acct_1234567890'],
      ['Bound', 'at 2026-11-01T10:00:00.000Z'],
      ['State', 'Not reported by Stripe since it was bound'],
    ]);
  });
  it("an unusable account names Stripe's problem, and a card_payments capability only when it has one", () => {
    const state = { chargesEnabled: false, transfers: 'inactive', cardPayments: null, usable: false, problem: 'Stripe has disabled charges on this account', checkedAt: '2026-11-02T00:00:00.000Z' };
    const rows = cardProcessorFields({ processor: 'stripe', connectedAccount: { ...binding, state } }, at);
    expect(rows).toContainEqual(['State', 'Cannot take payments: Stripe has disabled charges on this account']);
    expect(rows).toContainEqual(['Charges', 'disabled']);
    expect(rows).toContainEqual(['Transfers', 'inactive']);
    expect(rows.map(([k]) => k)).not.toContain('Card payments');
    const usable = cardProcessorFields({ processor: 'stripe', connectedAccount: { ...binding, state: { ...state, chargesEnabled: true, transfers: 'active', cardPayments: 'active', usable: true, problem: null } } }, at);
    expect(usable).toContainEqual(['State', 'Can take payments']);
    expect(usable).toContainEqual(['Card payments', 'active']);
  });
});
