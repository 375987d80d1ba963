/**
 * The policy every new wallet starts with (what the public product does): USDC
 * TransferWithAuthorization (EIP-3009, the x402 payment authorization) of at most 5 USDC per
 * signature, on each configured chain's USDC contract. Everything else is denied by default.
 */
import { DEFAULT_MAX_USDC_PER_SIGNATURE, type ChainConfig } from './chains.js';
import type { PolicyRule } from './policy-engine.js';

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
};

export const DEFAULT_POLICY_NAME = 'Default: USDC transfers up to 5 USDC';

export function defaultPolicyRules(chains: readonly ChainConfig[]): PolicyRule[] {
  return chains.map((chain) => ({
    name: `Allow USDC TransferWithAuthorization up to 5 USDC on ${chain.name}`,
    method: 'eth_signTypedData_v4',
    action: 'ALLOW',
    typed_data: { primary_type: 'TransferWithAuthorization', types: structuredClone(TRANSFER_WITH_AUTHORIZATION_TYPES) },
    conditions: [
      { field_source: 'ethereum_typed_data_domain', field: 'chainId', operator: 'eq', value: chain.chainId },
      { field_source: 'ethereum_typed_data_domain', field: 'verifyingContract', operator: 'eq', value: chain.usdc },
      { field_source: 'ethereum_typed_data_message', field: 'value', operator: 'lte', value: DEFAULT_MAX_USDC_PER_SIGNATURE.toString() },
    ],
  }));
}
