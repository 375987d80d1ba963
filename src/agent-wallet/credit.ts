/** Organization credit: its units, and balances in minor and whole units. */
import { notFound } from '../kernel/errors.js';
import type { AgentWalletRepository } from './agent-wallet.repository.js';
import { USDC_DECIMALS } from './chains.js';

/** Credit units and their decimals (minor units per whole unit = 10^decimals). */
export const CREDIT_UNITS = { USDC: USDC_DECIMALS } as const;
export type CreditUnit = keyof typeof CREDIT_UNITS;
export const DEFAULT_CREDIT_UNIT: CreditUnit = 'USDC';

export interface CreditBalance {
  unit: CreditUnit;
  balanceMinor: number;
  balance: number;
}

/** The organization's balance in minor units and in whole units of `unit`. */
export async function readCreditBalance(
  repo: Pick<AgentWalletRepository, 'organizationExists' | 'creditBalance'>,
  orgId: string,
  unit: CreditUnit = DEFAULT_CREDIT_UNIT,
): Promise<CreditBalance> {
  if (!(await repo.organizationExists(orgId))) throw notFound('Organization');
  const minor = await repo.creditBalance(orgId, unit);
  return { unit, balanceMinor: Number(minor), balance: Number(minor) / 10 ** CREDIT_UNITS[unit] };
}
