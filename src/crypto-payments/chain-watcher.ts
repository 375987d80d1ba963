/**
 * The chain watcher (a worker job): follows ERC-20 Transfer logs to the receiving wallets of every
 * configured chain by block range from a cursor stored in PostgreSQL, matches them to crypto
 * sessions, and follows matched transfers until they have the chain's confirmations (or vanish in
 * a reorganization). Safe with any number of workers: a lease on the chain's cursor row keeps two
 * from scanning one chain at once, and every write is idempotent behind unique keys (a log is
 * recorded once per (chain, tx, log index); a transaction pays at most one session; one order per
 * session), so a crash anywhere only repeats work that changes nothing the second time.
 *
 * The lease is short (CRYPTO_WATCHER_LEASE_SECONDS, 30 s by default) so that a crashed worker
 * holds its chains up for no longer than that, and a pass renews it as it goes, so that a long
 * pass on a slow node still keeps its chain: see CursorLease.
 */
import { randomUUID } from 'node:crypto';
import { getAddress } from 'viem';
import type { Clock } from '../kernel/clock.js';
import type { Logger } from '../kernel/logger.js';
import { randomToken } from '../kernel/ids.js';
import type { Job } from '../kernel/job.js';
import type { PaymentFlow } from '../commerce/payment-flow.js';
import type { ChainConfig, CryptoConfig } from './crypto-config.js';
import type { CryptoQuote } from '../commerce/model.js';
import type { CryptoRepository, CryptoTransfer } from './crypto.repository.js';
import { ViemChainClient, type ChainClient, type TransferLog } from './chain-client.js';
import { caip2 } from './crypto-quote.service.js';

/** A transfer that vanished is still looked for this long (a reorganized transaction is often mined again). */
const REMOVED_FOLLOW_MS = 3600_000;
const FOLLOW_BATCH = 500;
/** Receiving addresses per eth_getLogs call (topic OR-lists have limits on public nodes). */
const RECIPIENTS_PER_QUERY = 100;

/** A pass found at a checkpoint that its chain's cursor is no longer leased to it: it stops there. */
export class CursorLeaseLost extends Error {
  constructor(readonly chainId: number) {
    super(`the cursor lease of chain ${chainId} lapsed and is no longer this worker's`);
    this.name = 'CursorLeaseLost';
  }
}

/**
 * A pass's hold on a chain's cursor, renewed two ways: by a timer every third of the lease while
 * the pass runs (so one slow RPC call, up to the client's timeout and retry, does not lose the
 * chain), and at the pass's checkpoints once a third has gone by on the injectable clock. keep()
 * at a checkpoint throws CursorLeaseLost once a renewal found another owner. A dead worker's lease
 * lapses within one lease.
 */
class CursorLease {
  private renewedAt: number;
  private lost = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly repo: CryptoRepository,
    private readonly chainId: number,
    private readonly owner: string,
    private readonly clock: Clock,
    private readonly leaseMs: number,
    leasedAt: Date,
    logger: Logger,
  ) {
    this.renewedAt = leasedAt.getTime();
    this.timer = setInterval(() => {
      // A failed renewal (database unreachable) is not a lost lease: the pass finds out itself.
      this.renew().catch((err: unknown) => logger.warn({ err, chainId }, 'crypto chain watcher could not renew its cursor lease'));
    }, Math.max(1000, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  /** Throws CursorLeaseLost when another worker took the cursor over: nothing after it may run. */
  async keep(): Promise<void> {
    if (!this.lost && this.clock.now().getTime() - this.renewedAt > this.leaseMs / 3) await this.renew();
    if (this.lost) throw new CursorLeaseLost(this.chainId);
  }

  /** Stops the timer (the pass is over: the cursor is released or lost). */
  end(): void {
    clearInterval(this.timer);
  }

  private async renew(): Promise<void> {
    if (this.lost) return;
    const now = this.clock.now();
    if (await this.repo.renewCursorLease(this.chainId, this.owner, new Date(now.getTime() + this.leaseMs))) this.renewedAt = now.getTime();
    else this.lost = true;
  }
}

export class ChainWatcher {
  private readonly owner = `watcher-${randomUUID()}`;
  private readonly clients = new Map<number, ChainClient>();

  constructor(
    private readonly store: CryptoRepository,
    private readonly payments: PaymentFlow,
    private readonly config: CryptoConfig,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly clientFor: (chain: ChainConfig) => ChainClient = (chain) => new ViemChainClient(chain.rpcUrl),
    /** Told, after each pass that held the cursor, how many blocks remain unscanned (Prometheus). */
    private readonly observeLag?: (chainId: number, blocks: number) => void,
  ) {}

  job(): Job {
    return { name: 'crypto-chain-watcher', intervalMs: this.config.pollIntervalMs, run: () => this.runOnce() };
  }

  private repo(): CryptoRepository {
    return this.store;
  }

  private client(chain: ChainConfig): ChainClient {
    let client = this.clients.get(chain.chainId);
    if (!client) {
      client = this.clientFor(chain);
      this.clients.set(chain.chainId, client);
    }
    return client;
  }

  /** One pass over every chain; true when a chain has more blocks to scan right away. */
  async runOnce(): Promise<boolean> {
    let busy = false;
    for (const chain of this.config.chains) {
      try {
        busy = (await this.pass(chain)) || busy;
      } catch (err) {
        // One unreachable RPC must not stop the other chains; the cursor is unchanged, so nothing is missed.
        // By chain id and host: the RPC URL's path and query may carry the provider's key.
        this.logger.error({ err, chainId: chain.chainId, rpcHost: rpcHostOf(chain) }, 'crypto chain watcher pass failed');
      }
    }
    return busy;
  }

  async pass(chain: ChainConfig): Promise<boolean> {
    const repo = this.repo();
    const now = this.clock.now();
    const recipients = await repo.watchedAddresses(chain.chainId, now);
    if (recipients.length === 0) return false;
    await repo.ensureCursor(chain.chainId, now);
    const leaseMs = this.config.watcherLeaseSeconds * 1000;
    const cursor = await repo.leaseCursor(chain.chainId, this.owner, now, new Date(now.getTime() + leaseMs));
    if (!cursor) return false; // another worker has this chain
    const lease = new CursorLease(repo, chain.chainId, this.owner, this.clock, leaseMs, now, this.logger);
    try {
      const client = this.client(chain);
      const head = Number(await client.blockNumber());
      let next = cursor.nextBlock ?? Math.max(0, head - chain.initialLookback);
      if (cursor.nextBlock !== null && cursor.lastBlockHash && next > 0 && next - 1 <= head) {
        const last = await client.block(BigInt(next - 1));
        if (last.hash !== cursor.lastBlockHash) {
          // The last scanned block was replaced: rescan the confirmation depth (re-seen logs are no-ops).
          const rewound = Math.max(0, next - 1 - chain.confirmations);
          this.logger.warn({ chainId: chain.chainId, block: next - 1, rewoundTo: rewound }, 'chain reorganization detected; rescanning');
          next = rewound;
        }
      } else if (next > head + 1) {
        next = head + 1; // the node is behind (or the chain was reset): never skip blocks it will produce
      }
      let busy = false;
      let scannedThrough = next - 1;
      if (next <= head) {
        const to = Math.min(head, next + chain.blockRange - 1);
        await lease.keep();
        await this.scan(chain, client, lease, recipients, next, to);
        const toBlock = await client.block(BigInt(to));
        await lease.keep();
        // keep() asks the database only once a third of the lease has gone by; saving is itself a
        // compare-and-set on the owner, so a takeover it has not seen yet also stops the pass here.
        if (!(await repo.saveCursor(chain.chainId, this.owner, to + 1, toBlock.hash, this.clock.now()))) throw new CursorLeaseLost(chain.chainId);
        scannedThrough = to;
        busy = to < head;
      }
      this.observeLag?.(chain.chainId, head - scannedThrough);
      await this.follow(chain, client, lease, head);
      return busy;
    } catch (err) {
      if (!(err instanceof CursorLeaseLost)) throw err;
      // Not a failure: this pass stalled past its lease and another worker carries on from the
      // saved cursor; what this one recorded is idempotent and its unsaved progress is rescanned.
      this.logger.warn({ chainId: chain.chainId, leaseSeconds: this.config.watcherLeaseSeconds }, 'crypto chain watcher lost its cursor lease mid-pass; pass stopped');
      return false;
    } finally {
      lease.end();
      await repo.releaseCursor(chain.chainId, this.owner);
    }
  }

  private async scan(chain: ChainConfig, client: ChainClient, lease: CursorLease, recipients: `0x${string}`[], from: number, to: number): Promise<void> {
    const tokens = chain.tokens.map((t) => t.address);
    const logs: TransferLog[] = [];
    for (let i = 0; i < recipients.length; i += RECIPIENTS_PER_QUERY) {
      logs.push(...(await client.transferLogs(tokens, recipients.slice(i, i + RECIPIENTS_PER_QUERY), BigInt(from), BigInt(to))));
      await lease.keep();
    }
    logs.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
    const blockTimes = new Map<bigint, Date>();
    for (const log of logs) {
      let time = blockTimes.get(log.blockNumber);
      if (!time) {
        time = new Date(Number((await client.block(log.blockNumber)).timestamp) * 1000);
        blockTimes.set(log.blockNumber, time);
      }
      await this.record(chain, log, time);
      await lease.keep();
    }
  }

  /** Records one log (once) and, when it matches a session, applies its first sight. */
  private async record(chain: ChainConfig, log: TransferLog, blockTime: Date): Promise<void> {
    const repo = this.repo();
    const tokenAddress = getAddress(log.tokenAddress);
    const token = chain.tokens.find((t) => t.address === tokenAddress);
    if (!token) return;
    const to = getAddress(log.to);
    const now = this.clock.now();
    const { quote, note } = await this.match(chain, tokenAddress, to, log, blockTime);
    const candidate: CryptoTransfer = {
      id: `CTX_${randomToken()}`,
      chainId: chain.chainId,
      txHash: log.txHash,
      logIndex: log.logIndex,
      blockNumber: Number(log.blockNumber),
      blockHash: log.blockHash,
      blockTime,
      tokenSymbol: token.symbol,
      tokenAddress,
      fromAddress: getAddress(log.from),
      toAddress: to,
      value: log.value,
      status: quote ? 'PENDING' : 'IGNORED',
      checkoutSessionId: quote?.checkoutSessionId ?? null,
      orgId: quote?.orgId ?? null,
      orderId: null,
      note,
      confirmations: 0,
      seenAt: now,
      updatedAt: now,
    };
    let recorded: { transfer: CryptoTransfer; inserted: boolean };
    try {
      recorded = await repo.recordTransfer(candidate);
    } catch (err) {
      // The one-payment-per-transaction index: another log of this transaction was matched meanwhile.
      if (!isUniqueViolation(err)) throw err;
      recorded = await repo.recordTransfer({ ...candidate, status: 'IGNORED', checkoutSessionId: null, orgId: null, note: 'its transaction already pays a session' });
    }
    const transfer = recorded.transfer;
    if (transfer.status === 'IGNORED') {
      if (recorded.inserted) {
        this.logger.warn(
          { chainId: chain.chainId, txHash: transfer.txHash, logIndex: transfer.logIndex, from: transfer.fromAddress, to: transfer.toAddress, token: token.symbol, value: transfer.value.toString(), reason: transfer.note },
          'crypto transfer to a receiving wallet ignored',
        );
      }
      return;
    }
    // Known and already attached: a rescan (after a restart or a reorganization) changes nothing.
    if (transfer.status === 'PENDING' && transfer.orderId === null) await this.apply(transfer, 'seen');
  }

  /** The session a transfer pays: the exact quote, else the only open quote within tolerance. */
  private async match(chain: ChainConfig, tokenAddress: `0x${string}`, recipient: `0x${string}`, log: TransferLog, blockTime: Date): Promise<{ quote?: CryptoQuote; note: string }> {
    const repo = this.repo();
    const key = { chainId: chain.chainId, tokenAddress, recipient };
    const skewMs = this.config.clockSkewSeconds * 1000;
    if (log.value <= 0n || log.value > BigInt(Number.MAX_SAFE_INTEGER)) return { note: 'amount outside the range of any quote' };
    let quote = await repo.findExactQuote(key, log.value, blockTime, skewMs);
    let note = 'exact amount';
    if (!quote) {
      const bps = BigInt(this.config.matchToleranceBps);
      // Quotes q with |value - q| <= q * bps / 10000.
      const min = (log.value * 10_000n) / (10_000n + bps);
      const max = bps >= 10_000n ? BigInt(Number.MAX_SAFE_INTEGER) : (log.value * 10_000n + (10_000n - bps) - 1n) / (10_000n - bps);
      const candidates = (await repo.findOpenQuotesBetween(key, min, max, blockTime, skewMs)).filter((q) => {
        const amount = BigInt(q.amountUnits!);
        const diff = log.value > amount ? log.value - amount : amount - log.value;
        return diff * 10_000n <= amount * bps;
      });
      if (candidates.length !== 1) {
        return { note: candidates.length === 0 ? 'no open quote matches this amount' : `ambiguous: ${candidates.length} open quotes within tolerance` };
      }
      quote = candidates[0]!;
      note = log.value < BigInt(quote.amountUnits!) ? 'underpayment' : 'overpayment';
    }
    const paying = await repo.findPayingTransfer(chain.chainId, log.txHash);
    if (paying && paying.logIndex !== log.logIndex) return { note: 'its transaction already pays a session' };
    return { quote, note };
  }

  private async apply(transfer: CryptoTransfer, event: 'seen' | 'confirmed' | 'removed'): Promise<void> {
    const statusBefore = transfer.status;
    const quote = (await this.repo().findQuote(transfer.checkoutSessionId!))!;
    const result = await this.payments.applyCryptoTransfer({
      checkoutSessionId: transfer.checkoutSessionId!,
      event,
      chain: caip2(transfer.chainId),
      txHash: transfer.txHash,
      fromAddress: transfer.fromAddress,
      recipient: transfer.toAddress,
      valueUnits: Number(transfer.value),
      quotedUnits: quote.amountUnits!,
    });
    const now = this.clock.now();
    if (result.outcome === 'duplicate') {
      this.logger.warn(
        { chainId: transfer.chainId, txHash: transfer.txHash, checkoutSessionId: transfer.checkoutSessionId, orderId: result.order?.id, value: transfer.value.toString() },
        'crypto transfer to a session that is already paid: recorded, no order change',
      );
      Object.assign(transfer, { status: 'IGNORED', note: 'the session already has a payment (duplicate transfer)', updatedAt: now });
    } else if (result.order) {
      Object.assign(transfer, { orderId: result.order.id, updatedAt: now });
    }
    // Compare-and-set: a worker holding a stale copy (its cursor lease lapsed while another took
    // over) must not move a transfer back; what it would write, the other worker has written.
    await this.repo().updateTransfer(transfer, statusBefore);
  }

  /** Confirmation tracking and reorganization handling of matched transfers, by their receipts. */
  private async follow(chain: ChainConfig, client: ChainClient, lease: CursorLease, head: number): Promise<void> {
    const now = this.clock.now();
    const transfers = await this.repo().transfersToFollow(chain.chainId, new Date(now.getTime() - REMOVED_FOLLOW_MS), FOLLOW_BATCH);
    for (const transfer of transfers) {
      await lease.keep();
      // Every write below is a compare-and-set on the status read here: if another worker moved
      // the transfer on meanwhile (CONFIRMED, say), this stale copy is dropped, never written back.
      const readStatus = transfer.status;
      const receipt = await client.receipt(transfer.txHash);
      const log = receipt?.status === 'success'
        ? receipt.logs.find(
            (l) => getAddress(l.tokenAddress) === transfer.tokenAddress && getAddress(l.to) === transfer.toAddress && getAddress(l.from) === transfer.fromAddress && l.value === transfer.value,
          )
        : undefined;
      if (!receipt || !log) {
        if (transfer.status === 'PENDING') {
          this.logger.warn({ chainId: chain.chainId, txHash: transfer.txHash, checkoutSessionId: transfer.checkoutSessionId }, 'matched crypto transfer vanished before confirmation (reorganization)');
          transfer.status = 'REMOVED';
          transfer.confirmations = 0;
          transfer.updatedAt = now;
          if (!(await this.repo().updateTransfer(transfer, readStatus))) continue;
          if (transfer.orderId) await this.apply(transfer, 'removed');
        }
        continue;
      }
      const reappeared = readStatus === 'REMOVED';
      Object.assign(transfer, {
        status: 'PENDING',
        blockNumber: Number(log.blockNumber),
        blockHash: log.blockHash,
        logIndex: log.logIndex,
        confirmations: Math.max(0, head - Number(log.blockNumber) + 1),
        updatedAt: now,
      });
      if (!(await this.repo().updateTransfer(transfer, readStatus))) continue;
      if (reappeared || transfer.orderId === null) await this.apply(transfer, 'seen');
      if (transfer.status === 'PENDING' && transfer.confirmations >= chain.confirmations) {
        await this.apply(transfer, 'confirmed');
        transfer.status = 'CONFIRMED';
        transfer.updatedAt = this.clock.now();
        await this.repo().updateTransfer(transfer, 'PENDING');
      }
    }
  }
}

const rpcHostOf = (chain: ChainConfig): string => (URL.canParse(chain.rpcUrl) ? new URL(chain.rpcUrl).host : 'unknown');

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505';
}
