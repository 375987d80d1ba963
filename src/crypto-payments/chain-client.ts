/** The few JSON-RPC reads the chain watcher needs, over viem (any EIP-1193/HTTP node). */
import { createPublicClient, http, parseAbiItem, TransactionReceiptNotFoundError, type PublicClient } from 'viem';

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

export class ViemChainClient implements ChainClient {
  private readonly client: PublicClient;

  constructor(rpcUrl: string) {
    this.client = createPublicClient({ transport: http(rpcUrl, { timeout: 15_000, retryCount: 1 }) });
  }

  blockNumber(): Promise<bigint> {
    return this.client.getBlockNumber({ cacheTime: 0 });
  }

  async block(number: bigint) {
    const block = await this.client.getBlock({ blockNumber: number });
    return { hash: block.hash!, timestamp: block.timestamp };
  }

  async transferLogs(tokens: `0x${string}`[], recipients: `0x${string}`[], fromBlock: bigint, toBlock: bigint): Promise<TransferLog[]> {
    const logs = await this.client.getLogs({ address: tokens, event: TRANSFER_EVENT, args: { to: recipients }, fromBlock, toBlock });
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
    let receipt;
    try {
      receipt = await this.client.getTransactionReceipt({ hash: txHash });
    } catch (err) {
      if (err instanceof TransactionReceiptNotFoundError) return null;
      throw err;
    }
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
