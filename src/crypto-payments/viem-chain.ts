/** A configured chain as viem's `Chain`: its id, name and RPC URL, with ETH paying for gas. */
import type { Chain } from 'viem';
import type { ChainConfig } from './crypto-config.js';

export function viemChainOf(chain: ChainConfig): Chain {
  return {
    id: chain.chainId,
    name: chain.name,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  };
}
