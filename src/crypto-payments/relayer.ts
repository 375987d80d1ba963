/**
 * The relayer's transactions: one nonce per transaction, however many settles submit at once and
 * in however many processes (every `--role api` process holds the same relayer key).
 *
 * A submission prepares its transaction (gas, fees) outside any lock, then, holding the
 * relayer's nonce row on that chain locked (RelayerNonceRepository; within a process the
 * submissions also queue in memory, so they do not each hold a database connection while they
 * wait), picks the nonce, signs, broadcasts, records, and lets the next one in. The nonce is the
 * chain's pending count of the relayer's transactions, or the row's next nonce when that is
 * ahead (the node has not seen, or has lost, a transaction Kassa sent). A node that says the
 * nonce is used ("nonce too low", "replacement transaction underpriced": another sender of the
 * key, or a node behind another) makes the submission re-read the chain and take the next free
 * nonce; "already known" means these very bytes are in the node, so they count as sent. Before a
 * broadcast that answered with an error (a dropped connection, a refusal) is taken as not sent,
 * the node is asked for the transaction of these very bytes: when it has it (pending or mined),
 * the answer was lost and the transaction is sent (its settlement follows it by hash).
 *
 * Recovery (docs/x402-merchants.md, "Several API processes, one relayer"): a transaction the node
 * no longer knows (dropped from its mempool, a restarted node) leaves a gap that would hold every
 * later transaction back. The next submission sees the chain's pending count behind the row, and
 * broadcasts the ledger's transactions from the gap on again, byte for byte: same hash, so the
 * settle waiting for it and the finisher job follow it unchanged. A transaction that cannot be
 * broadcast again (its fee no longer enough, the relayer out of gas) gives its nonce to the new
 * transaction (a re-sync), and its settlement is failed by the finisher job as a dropped
 * transaction, so the payment can be settled again. Fees leave headroom (twice the base fee plus
 * the tip) so that a rising base fee does not strand a transaction; a transaction already stranded
 * is not replaced by a higher-fee copy (that would change its hash under the settlement).
 */
import {
  createPublicClient,
  http,
  keccak256,
  type Chain,
  type Hex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import type { ChainConfig } from './crypto-config.js';
import type { LockedRelayerNonce, RelayerNonceRepository } from './relayer.repository.js';
import { viemChainOf } from './viem-chain.js';

/** What the relayer asks of a chain's node. */
export interface RelayerNode {
  /** The relayer's transaction count: mined (`latest`) and with the node's pending ones (`pending`). */
  transactionCounts(address: `0x${string}`): Promise<{ latest: number; pending: number }>;
  /** Broadcasts a signed transaction; throws with the node's refusal. */
  sendRaw(raw: Hex): Promise<void>;
  /** Whether the node knows the transaction (mined or pending). */
  known(txHash: Hex): Promise<boolean>;
}

/** How often a submission takes the next nonce after the node said its nonce was used. */
const MAX_NONCE_ATTEMPTS = 5;

/** The node's refusal of a broadcast, as far as nonces go. */
export function nonceRefusal(err: unknown): 'known' | 'used' | 'ahead' | undefined {
  const text = errorText(err);
  if (/already known|known transaction|already imported|transaction already exists|AlreadyKnown/i.test(text)) return 'known';
  if (/nonce too low|nonce has already been used|NonceTooLow|nonce is too low|OldNonce|replacement transaction underpriced|replacement fee too low/i.test(text)) return 'used';
  if (/nonce too high|NonceTooHigh|can't be queued/i.test(text)) return 'ahead';
  return undefined;
}

function errorText(err: unknown, depth = 0): string {
  if (!err || typeof err !== 'object' || depth > 5) return String(err ?? '');
  const e = err as { name?: unknown; message?: unknown; details?: unknown; shortMessage?: unknown; cause?: unknown };
  return [e.name, e.message, e.details, e.shortMessage].filter((v) => typeof v === 'string').join(' | ') + ' | ' + errorText(e.cause, depth + 1);
}

export class RelayerNonces {
  /** Submissions of this process, queued per relayer and chain. */
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly repo: RelayerNonceRepository,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /**
   * Broadcasts the transaction `sign` signs for the nonce it is given, with a nonce no other
   * submission of this relayer on this chain uses; its hash. `sign` may be called more than once
   * (with the next nonce, when the node says one is used).
   */
  send(chainId: number, address: `0x${string}`, node: RelayerNode, sign: (nonce: number) => Promise<Hex>): Promise<Hex> {
    const key = `${chainId}:${address.toLowerCase()}`;
    const previous = this.queues.get(key) ?? Promise.resolve();
    const turn = previous.then(
      () => this.repo.withLockedNonce(chainId, address, this.clock.now(), (locked) => this.sendLocked(locked, chainId, address, node, sign)),
      () => this.repo.withLockedNonce(chainId, address, this.clock.now(), (locked) => this.sendLocked(locked, chainId, address, node, sign)),
    );
    const settled = turn.catch(() => undefined);
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return turn;
  }

  private async sendLocked(locked: LockedRelayerNonce, chainId: number, address: `0x${string}`, node: RelayerNode, sign: (nonce: number) => Promise<Hex>): Promise<Hex> {
    const counts = await node.transactionCounts(address);
    await locked.forgetBelow(counts.latest);
    let nonce = await this.firstFreeNonce(locked, chainId, address, node, counts.pending);
    for (let attempt = 1; ; attempt++) {
      const raw = await sign(nonce);
      const txHash = keccak256(raw);
      try {
        await node.sendRaw(raw);
      } catch (err) {
        const refusal = nonceRefusal(err);
        if (refusal === 'known') {
          // These very bytes reached the node already (an earlier broadcast whose answer was lost).
        } else if (refusal !== 'ahead' && (await this.nodeHas(node, txHash))) {
          // The node took the transaction and its answer was lost (a dropped connection; a retry of
          // the same bytes told "nonce too low" by this very transaction, mined): it is sent. Taking
          // the next nonce would send the transfer a second time; failing would leave a mined
          // transfer unrecorded.
          this.logger.warn({ chainId, relayer: address, nonce, txHash, err: { name: (err as Error).name } }, 'x402 relayer broadcast answered with an error, but the node has the transaction: counted as sent');
        } else if ((refusal === 'used' || refusal === 'ahead') && attempt < MAX_NONCE_ATTEMPTS) {
          const { pending } = await node.transactionCounts(address);
          const next = refusal === 'used' ? Math.max(nonce + 1, pending) : pending;
          this.logger.warn({ chainId, relayer: address, nonce, next, refusal }, 'x402 relayer nonce refused by the node; re-synced with the chain');
          nonce = next;
          continue;
        } else {
          throw err;
        }
      }
      await locked.recordSent({ nonce, txHash, raw, sentAt: this.clock.now() }, nonce + 1, this.clock.now());
      return txHash;
    }
  }

  /** Whether the node has the transaction (mined or pending); false when it cannot say (unreachable). */
  private async nodeHas(node: RelayerNode, txHash: Hex): Promise<boolean> {
    try {
      return await node.known(txHash);
    } catch {
      return false;
    }
  }

  /**
   * The nonce of the next transaction: the chain's pending count, unless Kassa has sent beyond
   * it. Then the node lacks some of Kassa's transactions (lost, or not yet seen by this node):
   * each one it does not know is broadcast again; the first that cannot be gives its nonce to
   * the new transaction.
   */
  private async firstFreeNonce(locked: LockedRelayerNonce, chainId: number, address: `0x${string}`, node: RelayerNode, pending: number): Promise<number> {
    const stored = locked.nextNonce;
    if (stored === null || pending >= stored) return pending;
    const sent = (await locked.sentFrom(pending)).filter((tx) => tx.nonce < stored);
    if (sent[0]?.nonce !== pending) {
      this.logger.warn({ chainId, relayer: address, pending, stored }, 'x402 relayer: the chain is behind a nonce Kassa has no transaction of; re-synced with the chain');
      return pending;
    }
    for (const tx of sent) {
      if (await node.known(tx.txHash)) continue;
      try {
        await node.sendRaw(tx.raw);
        this.logger.warn({ chainId, relayer: address, nonce: tx.nonce, txHash: tx.txHash }, 'x402 relayer transaction unknown to the node: broadcast again');
      } catch (err) {
        if (nonceRefusal(err)) continue; // known after all, or its nonce was spent meanwhile
        this.logger.warn({ chainId, relayer: address, nonce: tx.nonce, txHash: tx.txHash, err: { name: (err as Error).name } }, 'x402 relayer transaction lost and not broadcast again; its nonce is reused');
        return tx.nonce;
      }
    }
    return stored;
  }
}

/** Base fee multiplier of the fee cap: room for the base fee to double before a transaction is stranded. */
const BASE_FEE_HEADROOM = 2;

/** A chain's relayer submissions over viem: prepare (gas, fees), then sign and send through RelayerNonces. */
export function viemRelayer(chain: ChainConfig, nonces: RelayerNonces) {
  const transport = http(chain.rpcUrl, { retryCount: 1 });
  const viemChain: Chain = { ...viemChainOf(chain), fees: { baseFeeMultiplier: BASE_FEE_HEADROOM } };
  const client = createPublicClient({ chain: viemChain, transport });
  const node: RelayerNode = {
    transactionCounts: async (address) => {
      const [latest, pending] = await Promise.all([
        client.getTransactionCount({ address, blockTag: 'latest' }),
        client.getTransactionCount({ address, blockTag: 'pending' }),
      ]);
      return { latest, pending: Math.max(latest, pending) };
    },
    sendRaw: async (raw) => {
      await client.sendRawTransaction({ serializedTransaction: raw });
    },
    known: async (txHash) => {
      try {
        await client.getTransaction({ hash: txHash });
        return true;
      } catch (err) {
        if ((err as Error).name === 'TransactionNotFoundError') return false;
        throw err;
      }
    },
  };
  return {
    node,
    /** Sends `data` to `to` from the relayer; the transaction's hash once the node has it. */
    async submit(relayerKey: Hex, to: `0x${string}`, data: Hex): Promise<Hex> {
      const account = privateKeyToAccount(relayerKey);
      // Gas and fees need no nonce: prepared before the nonce lock, which then only covers count, sign, send.
      const prepared = await client.prepareTransactionRequest({ account, to, data, chain: viemChain, parameters: ['fees', 'gas', 'type'] });
      const { account: _account, parameters: _parameters, ...request } = prepared as typeof prepared & { parameters?: unknown };
      return nonces.send(chain.chainId, account.address, node, (nonce) => account.signTransaction({ ...request, chainId: chain.chainId, nonce } as never));
    },
  };
}
