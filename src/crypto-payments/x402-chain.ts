/**
 * The x402 facilitator's access to one chain (viem over the chain's RPC URL): the EIP-3009
 * token's reads, the simulation and submission of `transferWithAuthorization` from the relayer,
 * and the receipts of what was submitted.
 */
import { createPublicClient, createWalletClient, encodeFunctionData, http, parseAbi, type Chain, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { ChainConfig } from './crypto-config.js';
import { viemRelayer, type RelayerNonces } from './relayer.js';

export const EIP3009_ABI = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
  'function name() view returns (string)',
  'function version() view returns (string)',
]);

/** `transferWithAuthorization`'s arguments: from, to, value, validAfter, validBefore, nonce, v, r, s. */
export type TransferArgs = readonly [`0x${string}`, `0x${string}`, bigint, bigint, bigint, Hex, number, Hex, Hex];

/** Reads and submissions on one chain (viem over the chain's RPC URL). */
export interface X402Chain {
  authorizationUsed(token: `0x${string}`, from: `0x${string}`, nonce: Hex): Promise<boolean>;
  balanceOf(token: `0x${string}`, owner: `0x${string}`): Promise<bigint>;
  /** Simulates the call from the relayer: throws with the revert reason when it would fail. */
  simulate(relayer: `0x${string}`, token: `0x${string}`, args: TransferArgs): Promise<void>;
  submit(relayerKey: Hex, token: `0x${string}`, args: TransferArgs): Promise<Hex>;
  /** The token's EIP-712 domain name and version (FiatToken's `name()` and `version()`). */
  tokenDomain(token: `0x${string}`): Promise<{ name: string; version: string }>;
  /** The mined transaction's status and block; null when it is not in the canonical chain. */
  receipt(txHash: Hex): Promise<{ status: 'success' | 'reverted'; blockNumber: bigint; blockHash: Hex } | null>;
  /** Whether the node knows the transaction at all (mined or pending). */
  transactionKnown(txHash: Hex): Promise<boolean>;
  blockNumber(): Promise<bigint>;
  /** Waits until the transaction has `confirmations` blocks (its own included); its status. */
  waitFor(txHash: Hex, confirmations: number): Promise<'success' | 'reverted'>;
}

/** With `nonces`, submissions take their nonce from it (one per transaction across processes; src/crypto-payments/relayer.ts). */
export function viemX402Chain(chain: ChainConfig, nonces?: RelayerNonces): X402Chain {
  const relayed = nonces && viemRelayer(chain, nonces);
  const transport = http(chain.rpcUrl, { retryCount: 1 });
  const viemChain: Chain = {
    id: chain.chainId,
    name: chain.name,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [chain.rpcUrl] } },
  };
  const client = createPublicClient({ chain: viemChain, transport, pollingInterval: 250 });
  return {
    authorizationUsed: (token, from, nonce) =>
      client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'authorizationState', args: [from, nonce] }),
    balanceOf: (token, owner) => client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'balanceOf', args: [owner] }),
    tokenDomain: async (token) => {
      const [name, version] = await Promise.all([
        client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'name' }),
        client.readContract({ address: token, abi: EIP3009_ABI, functionName: 'version' }),
      ]);
      return { name, version };
    },
    simulate: async (relayer, token, args) => {
      await client.simulateContract({ account: relayer, address: token, abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args });
    },
    submit: async (relayerKey, token, args) => {
      if (relayed) return relayed.submit(relayerKey, token, encodeFunctionData({ abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args }));
      const wallet = createWalletClient({ account: privateKeyToAccount(relayerKey), chain: viemChain, transport });
      return wallet.writeContract({ address: token, abi: EIP3009_ABI, functionName: 'transferWithAuthorization', args });
    },
    receipt: async (hash) => {
      try {
        const receipt = await client.getTransactionReceipt({ hash });
        return { status: receipt.status, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash };
      } catch (err) {
        if ((err as Error).name === 'TransactionReceiptNotFoundError') return null;
        throw err;
      }
    },
    transactionKnown: async (hash) => {
      try {
        await client.getTransaction({ hash });
        return true;
      } catch (err) {
        if ((err as Error).name === 'TransactionNotFoundError') return false;
        throw err;
      }
    },
    blockNumber: () => client.getBlockNumber({ cacheTime: 0 }),
    waitFor: async (txHash, confirmations) => {
      const receipt = await client.waitForTransactionReceipt({ hash: txHash, confirmations: Math.max(1, confirmations), timeout: 600_000 });
      return receipt.status;
    },
  };
}
