/**
 * The EVM chains this deployment signs for by default: each one gets an ALLOW rule in a new
 * wallet's default policy, and its USDC contract is how history entries name the asset.
 */
export interface ChainConfig {
  chainId: number;
  name: string;
  /** EIP-55 address of the chain's native USDC (FiatTokenV2, EIP-3009). */
  usdc: `0x${string}`;
}

export const DEFAULT_CHAINS: readonly ChainConfig[] = [
  { chainId: 8453, name: 'Base', usdc: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' },
  { chainId: 84532, name: 'Base Sepolia', usdc: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' },
];

/** USDC has 6 decimals: 5 USDC is 5 000 000 base units. */
export const USDC_DECIMALS = 6;
export const DEFAULT_MAX_USDC_PER_SIGNATURE = 5n * 10n ** BigInt(USDC_DECIMALS);

/** `USDC` when the contract is a configured chain's USDC, otherwise the contract address itself. */
export function assetName(chains: readonly ChainConfig[], chainId: number | null, contract: string): string {
  const chain = chains.find((c) => c.chainId === chainId);
  return chain && chain.usdc.toLowerCase() === contract.toLowerCase() ? 'USDC' : contract;
}
