/** Typed data for the agent wallet tests, apart from helpers.ts so the pure tests need no test context. */
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/agent-wallet/default-policy.js';

export const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

/** An x402-style USDC TransferWithAuthorization on Base. */
export function usdcTransfer(from: string, value: string, overrides: { chainId?: number; verifyingContract?: string; to?: string } = {}) {
  return {
    domain: {
      name: 'USD Coin',
      version: '2',
      chainId: overrides.chainId ?? 8453,
      verifyingContract: overrides.verifyingContract ?? BASE_USDC,
    },
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      ...structuredClone(TRANSFER_WITH_AUTHORIZATION_TYPES),
    },
    primary_type: 'TransferWithAuthorization',
    message: {
      from,
      to: overrides.to ?? '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      value,
      validAfter: '0',
      validBefore: '1795000000',
      nonce: '0x9c1f4e2a7b3d5f8e6a0c2b4d6f8e1a3c5b7d9f0e2a4c6e8b1d3f5a7c9e0b2d4f',
    },
  };
}
