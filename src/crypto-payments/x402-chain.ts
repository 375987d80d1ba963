/**
 * The x402 facilitator's access to one chain (viem over the chain's RPC URL): the EIP-3009
 * token's reads, the simulation and submission of `transferWithAuthorization` from the relayer,
 * and the receipts of what was submitted.
 */
import { BaseError, createPublicClient, getAddress, createWalletClient, encodeFunctionData, http, HttpRequestError, parseAbi, TimeoutError, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { AppError, serviceUnavailable } from '../kernel/errors.js';
import type { ChainConfig } from './crypto-config.js';
import { viemRelayer, type RelayerNonces } from './relayer.js';
import { viemChainOf } from './viem-chain.js';

export const EIP3009_ABI = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
  'function name() view returns (string)',
  'function version() view returns (string)',
]);

const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/** `transferWithAuthorization`'s arguments: from, to, value, validAfter, validBefore, nonce, v, r, s. */
export type TransferArgs = readonly [`0x${string}`, `0x${string}`, bigint, bigint, bigint, Hex, number, Hex, Hex];

/** An ERC-20 Transfer event of a receipt. */
export interface TokenTransfer {
  token: `0x${string}`;
  from: `0x${string}`;
  to: `0x${string}`;
  value: bigint;
}

/** Reads and submissions on one chain (viem over the chain's RPC URL). */
export interface X402Chain {
  authorizationUsed(token: `0x${string}`, from: `0x${string}`, nonce: Hex): Promise<boolean>;
  balanceOf(token: `0x${string}`, owner: `0x${string}`): Promise<bigint>;
  /** Simulates the call from the relayer: throws with the revert reason when it would fail. */
  simulate(relayer: `0x${string}`, token: `0x${string}`, args: TransferArgs): Promise<void>;
  submit(relayerKey: Hex, token: `0x${string}`, args: TransferArgs): Promise<Hex>;
  /** The token's EIP-712 domain name and version (FiatToken's `name()` and `version()`). */
  tokenDomain(token: `0x${string}`): Promise<{ name: string; version: string }>;
  /** The mined transaction's status, block and Transfer events; null when it is not in the canonical chain. */
  receipt(txHash: Hex): Promise<{ status: 'success' | 'reverted'; blockNumber: bigint; blockHash: Hex; transfers: TokenTransfer[] } | null>;
  /** Whether the node knows the transaction at all (mined or pending). */
  transactionKnown(txHash: Hex): Promise<boolean>;
  blockNumber(): Promise<bigint>;
  /** Waits until the transaction has `confirmations` blocks (its own included); its status and Transfer events. */
  waitFor(txHash: Hex, confirmations: number): Promise<{ status: 'success' | 'reverted'; transfers: TokenTransfer[] }>;
}

/** The ERC-20 Transfer events among a receipt's logs. */
export function transfersOf(logs: ReadonlyArray<{ address: `0x${string}`; topics: readonly Hex[]; data: Hex }>): TokenTransfer[] {
  const transfers: TokenTransfer[] = [];
  for (const log of logs) {
    if (log.topics[0] !== TRANSFER_TOPIC || log.topics.length !== 3) continue;
    transfers.push({ token: getAddress(log.address), from: getAddress(`0x${log.topics[1]!.slice(26)}`), to: getAddress(`0x${log.topics[2]!.slice(26)}`), value: BigInt(log.data) });
  }
  return transfers;
}

/** A node that did not answer (connection refused, HTTP error status, timeout), as opposed to an answer refusing the call. */
export function isNodeUnreachable(err: unknown): boolean {
  if (err instanceof AppError) return err.code === 'SERVICE_UNAVAILABLE';
  if (err instanceof BaseError) return Boolean(err.walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError));
  return err instanceof TypeError && /fetch failed/i.test(err.message);
}

/**
 * Every call of `access`, with an unreachable node turned into a 503 (`Retry-After`): verify,
 * settle and the paywall answer "try again" rather than a 500 or a refusal of the payment.
 */
export function unavailableWhenUnreachable(chain: ChainConfig, access: X402Chain): X402Chain {
  const wrapped = {} as Record<string, unknown>;
  for (const [name, fn] of Object.entries(access) as Array<[string, (...args: unknown[]) => Promise<unknown>]>) {
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await fn(...args);
      } catch (err) {
        if (isNodeUnreachable(err)) throw serviceUnavailable(`The node of ${chain.name} (eip155:${chain.chainId}) is unreachable; retry later`);
        throw err;
      }
    };
  }
  return wrapped as unknown as X402Chain;
}

/** With `nonces`, submissions take their nonce from it (one per transaction across processes; src/crypto-payments/relayer.ts). */
export function viemX402Chain(chain: ChainConfig, nonces?: RelayerNonces): X402Chain {
  const relayed = nonces && viemRelayer(chain, nonces);
  const transport = http(chain.rpcUrl, { retryCount: 1 });
  const viemChain = viemChainOf(chain);
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
        return { status: receipt.status, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash, transfers: transfersOf(receipt.logs) };
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
      return { status: receipt.status, transfers: transfersOf(receipt.logs) };
    },
  };
}
