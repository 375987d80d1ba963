/**
 * The card processor's state in words (Settings → Organization): which processor the deployment
 * runs and, on Stripe, the organization's Connect account and what Stripe last said of it.
 */
import type { components } from '../../../../generated/console.js';

type CardProcessor = components['schemas']['CardProcessorStatusResponse']['data'];

export function cardProcessorFields(status: CardProcessor, formatTime: (iso: string) => string): Array<[string, string]> {
  if (status.processor === 'sandbox') return [['Processor', 'Sandbox: test cards only, no money moves']];
  const account = status.connectedAccount;
  const rows: Array<[string, string]> = [['Processor', 'Stripe']];
  if (!account || account.accountId === null) {
    rows.push(['Connect account', 'None bound: payments go to the platform\'s Stripe account']);
    return rows;
  }
  rows.push(['Connect account', account.accountId]);
  if (account.boundAt) rows.push(['Bound', formatTime(account.boundAt)]);
  const state = account.state;
  if (!state) rows.push(['State', 'Not reported by Stripe since it was bound']);
  else {
    rows.push(['State', state.usable ? 'Can take payments' : `Cannot take payments: ${state.problem ?? 'see Stripe'}`]);
    rows.push(['Charges', state.chargesEnabled ? 'enabled' : 'disabled']);
    rows.push(['Transfers', state.transfers ?? 'none']);
    if (state.cardPayments !== null) rows.push(['Card payments', state.cardPayments]);
    rows.push(['Checked', formatTime(state.checkedAt)]);
  }
  return rows;
}
