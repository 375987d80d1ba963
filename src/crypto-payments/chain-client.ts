/** The few JSON-RPC reads the chain watcher needs, over viem (any EIP-1193/HTTP node). */
import { createPublicClient, http, parseAbiItem, TransactionReceiptNotFoundError, type PublicClient } from 'viem';
import { SecretValues, urlSecretParts, withoutUrlPaths } from '../kernel/redaction.js';

export const TRANSFER_EVENT = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)');

export interface TransferLog {
  tokenAddress: `0x${string}`;
  from: `0x${string}`;
  to: `0x${string}`;
  value: bigint;
  txHash: `0x${string}`;
  logIndex: number;
  blockNumber: bigint;
  blockHash: `0x${string}`;
}

export interface ChainReceipt {
  status: 'success' | 'reverted';
  blockNumber: bigint;
  blockHash: `0x${string}`;
  logs: TransferLog[];
}

export interface ChainClient {
  blockNumber(): Promise<bigint>;
  block(number: bigint): Promise<{ hash: `0x${string}`; timestamp: bigint }>;
  /** ERC-20 Transfer logs of these tokens to these recipients in [fromBlock, toBlock]. */
  transferLogs(tokens: `0x${string}`[], recipients: `0x${string}`[], fromBlock: bigint, toBlock: bigint): Promise<TransferLog[]>;
  /** The receipt on the node's canonical chain; null when the transaction is not (or no longer) mined. */
  receipt(txHash: `0x${string}`): Promise<ChainReceipt | null>;
}

/**
 * A failed call to a chain's node, told by the node's host only. Providers put their API key in
 * the URL's path or query (`/v2/<key>`, `?apikey=<key>`); viem's errors quote the whole URL, and
 * the node's answer may repeat the key. The library's error is not kept as `cause`: log
 * serializers print causes.
 */
export class ChainRpcError extends Error {
  constructor(
    readonly rpcHost: string,
    readonly call: string,
    message: string,
    /** The node's HTTP status, when it answered one. */
    readonly status?: number,
    /** The JSON-RPC error code, when the node sent one. */
    readonly rpcCode?: number,
  ) {
    super(message);
    this.name = 'ChainRpcError';
  }
}

/** How much of the node's answer a ChainRpcError keeps. */
const MAX_DETAILS = 300;

/** The node's HTTP status, wherever viem put it in its chain of causes (an RpcError wraps the request's). */
function httpStatusIn(err: unknown): number | undefined {
  let current = err as { status?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < 5; depth++, current = current.cause as typeof current) {
    if (typeof current.status === 'number') return current.status;
  }
  return undefined;
}

export class ViemChainClient implements ChainClient {
  private readonly client: PublicClient;
  private readonly rpcHost: string;
  private readonly urlSecrets = new SecretValues();

  constructor(rpcUrl: string) {
    this.client = createPublicClient({ transport: http(rpcUrl, { timeout: 15_000, retryCount: 1 }) });
    this.rpcHost = URL.canParse(rpcUrl) ? new URL(rpcUrl).host : 'the configured node';
    for (const part of urlSecretParts(rpcUrl)) this.urlSecrets.add(part);
  }

  /** Runs one read; anything it throws becomes a ChainRpcError without the URL's path, query or user info. */
  private async call<T>(name: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw this.describe(name, err);
    }
  }

  private describe(call: string, err: unknown): ChainRpcError {
    const e = (err ?? {}) as { name?: unknown; shortMessage?: unknown; details?: unknown; message?: unknown; status?: unknown; code?: unknown };
    const clean = (text: string) => withoutUrlPaths(this.urlSecrets.scrub(text));
    const what = (typeof e.shortMessage === 'string' ? e.shortMessage : typeof e.message === 'string' ? e.message.split('\n')[0]! : String(err)).replace(/\.$/, '');
    const details = typeof e.details === 'string' && e.details ? `: ${e.details.slice(0, MAX_DETAILS)}` : '';
    const status = httpStatusIn(err);
    const rpcCode = typeof e.code === 'number' ? e.code : undefined;
    const name = typeof e.name === 'string' ? e.name : 'Error';
    const codes = [status !== undefined ? `HTTP ${status}` : '', rpcCode !== undefined ? `JSON-RPC ${rpcCode}` : ''].filter(Boolean).join(', ');
    return new ChainRpcError(this.rpcHost, call, clean(`${call} on ${this.rpcHost} failed: ${name}: ${what}${codes ? ` (${codes})` : ''}${details}`), status, rpcCode);
  }

  blockNumber(): Promise<bigint> {
    return this.call('eth_blockNumber', () => this.client.getBlockNumber({ cacheTime: 0 }));
  }

  async block(number: bigint) {
    const block = await this.call('eth_getBlockByNumber', () => this.client.getBlock({ blockNumber: number }));
    return { hash: block.hash!, timestamp: block.timestamp };
  }

  async transferLogs(tokens: `0x${string}`[], recipients: `0x${string}`[], fromBlock: bigint, toBlock: bigint): Promise<TransferLog[]> {
    const logs = await this.call('eth_getLogs', () => this.client.getLogs({ address: tokens, event: TRANSFER_EVENT, args: { to: recipients }, fromBlock, toBlock }));
    return logs
      .filter((l) => !l.removed && l.transactionHash && l.blockHash && l.logIndex !== null && l.blockNumber !== null)
      .map((l) => ({
        tokenAddress: l.address,
        from: l.args.from!,
        to: l.args.to!,
        value: l.args.value!,
        txHash: l.transactionHash!,
        logIndex: l.logIndex!,
        blockNumber: l.blockNumber!,
        blockHash: l.blockHash!,
      }));
  }

  async receipt(txHash: `0x${string}`): Promise<ChainReceipt | null> {
    const receipt = await this.call('eth_getTransactionReceipt', () =>
      this.client.getTransactionReceipt({ hash: txHash }).catch((err: unknown) => {
        if (err instanceof TransactionReceiptNotFoundError) return null;
        throw err;
      }),
    );
    if (!receipt) return null;
    const transferTopic = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
    const logs: TransferLog[] = [];
    for (const l of receipt.logs) {
      if (l.topics[0] !== transferTopic || l.topics.length !== 3) continue;
      logs.push({
        tokenAddress: l.address,
        from: `0x${l.topics[1]!.slice(26)}`,
        to: `0x${l.topics[2]!.slice(26)}`,
        value: BigInt(l.data),
        txHash,
        logIndex: l.logIndex,
        blockNumber: receipt.blockNumber,
        blockHash: receipt.blockHash,
      });
    }
    return { status: receipt.status, blockNumber: receipt.blockNumber, blockHash: receipt.blockHash, logs };
  }
}
