/**
 * Read replicas (DATABASE_REPLICA_URL): which handle a read that tolerates lag runs on.
 *
 * Only reads a repository marks as lag-tolerant (through `LagTolerantReads`) ever reach a replica;
 * everything else, and every transaction, stays on the primary. A replica is used for a caller (an
 * organization) only when:
 * - it answered the last health check (every `checkIntervalMs`) and is still in recovery;
 * - it has replayed the WAL the primary had written at a moment no older than `maxLagMs`
 *   (the check samples the primary's `pg_current_wal_lsn()`, then each replica's
 *   `pg_last_wal_replay_lsn()`: a replica whose replay position passed a sample holds every
 *   transaction committed before that sample was taken);
 * - read-your-writes: the caller has no write in flight in this process, and the replica has passed
 *   a primary sample taken after the caller's last write in this process ended.
 * A replica that fails while a read runs on it (stopped, unreachable, recovery conflict) is marked
 * down until the next successful check, and the read is run again on the primary.
 */
import type { Knex } from 'knex';
import type { LagTolerantReads } from '../kernel/lag-tolerant-reads.js';

/** Where writes are reported from (the HTTP layer: each request that may write, by organization). */
export interface WriteTracker {
  /** A write of `caller` starts; call the returned function once it has committed (or failed). */
  begin(caller: string): () => void;
}

export interface ReplicaStatus {
  name: string;
  /** Answered the last check and is in recovery. */
  up: boolean;
  /** Seconds between now and the newest primary sample it has replayed (null: none yet). */
  lagSeconds: number | null;
  /** Up and within the lag bound: reads may go there. */
  usable: boolean;
}

interface Replica {
  name: string;
  db: Knex;
  up: boolean;
  /** When the newest primary sample it has replayed was taken (ms since epoch); 0: none. */
  freshAsOf: number;
  lastCheckOk: number;
}

interface Sample {
  at: number;
  lsn: bigint;
}

/** 'X/Y' (hex) as a number, comparable. */
export function parseLsn(text: string): bigint {
  const [high, low] = text.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

/** SQLSTATE classes and driver codes meaning the server is gone or refuses to serve, not a bad query. */
export function isUnavailable(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | undefined;
  const code = e?.code ?? '';
  if (/^(08|57P0|53)/.test(code)) return true; // connection exceptions, shutdown/crash, insufficient resources
  if (code === '40001' && /conflict with recovery/i.test(e?.message ?? '')) return true; // a replica cancels a read that blocks replay
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH'].includes(code)) return true;
  return /Knex: Timeout acquiring a connection|Connection terminated|timeout expired|Query read timeout/i.test(e?.message ?? '');
}

export interface ReadRouterOptions {
  maxLagMs: number;
  checkIntervalMs: number;
  /** A check that takes longer than this counts as a failed check. */
  checkTimeoutMs?: number;
  now?: () => number;
  onError?: (replica: string, error: unknown) => void;
}

/** Routes lag-tolerant reads between the primary and its replicas (see the file's comment). */
export class ReadRouter implements WriteTracker {
  private readonly replicas: Replica[];
  private samples: Sample[] = [];
  private readonly lastWrite = new Map<string, number>();
  private readonly inFlight = new Map<string, number>();
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(
    private readonly primary: Knex,
    replicas: Array<{ name: string; db: Knex }>,
    private readonly options: ReadRouterOptions,
  ) {
    this.replicas = replicas.map((r) => ({ ...r, up: false, freshAsOf: 0, lastCheckOk: 0 }));
    this.now = options.now ?? Date.now;
  }

  get hasReplicas(): boolean {
    return this.replicas.length > 0;
  }

  /** Starts the periodic health and lag checks (the first one at once). */
  start(): void {
    if (this.timer || !this.hasReplicas) return;
    void this.check();
    this.timer = setInterval(() => void this.check(), this.options.checkIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
  }

  begin(caller: string): () => void {
    if (!this.hasReplicas) return () => {};
    this.inFlight.set(caller, (this.inFlight.get(caller) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = (this.inFlight.get(caller) ?? 1) - 1;
      if (left > 0) this.inFlight.set(caller, left);
      else this.inFlight.delete(caller);
      this.lastWrite.set(caller, this.now());
    };
  }

  /** The handle a lag-tolerant read of `caller` should use now (the primary when no replica fits). */
  handleFor(caller: string): Knex {
    const replica = this.pick(caller);
    return replica ? replica.db : this.primary;
  }

  /** Runs `work` on a fitting replica; again on the primary when that replica turns out to be down. */
  async read<T>(caller: string, work: (db: Knex) => Promise<T>): Promise<T> {
    const replica = this.pick(caller);
    if (!replica) return work(this.primary);
    try {
      return await work(replica.db);
    } catch (error) {
      if (!isUnavailable(error)) throw error;
      replica.up = false;
      this.options.onError?.(replica.name, error);
      return work(this.primary);
    }
  }

  /** A `LagTolerantReads` over repositories made on each handle once. */
  reads<R>(make: (db: Knex) => R): LagTolerantReads<R> {
    const made = new Map<Knex, R>();
    const on = (db: Knex): R => {
      let repository = made.get(db);
      if (repository === undefined) made.set(db, (repository = make(db)));
      return repository;
    };
    return { read: (caller, work) => this.read(caller, (db) => work(on(db))) };
  }

  status(): ReplicaStatus[] {
    const now = this.now();
    return this.replicas.map((r) => ({
      name: r.name,
      up: r.up,
      lagSeconds: r.freshAsOf ? Math.max(0, now - r.freshAsOf) / 1000 : null,
      usable: this.fresh(r, now),
    }));
  }

  private fresh(replica: Replica, now: number): boolean {
    const stale = now - replica.lastCheckOk > 3 * this.options.checkIntervalMs + (this.options.checkTimeoutMs ?? 1000);
    return replica.up && !stale && replica.freshAsOf > 0 && now - replica.freshAsOf <= this.options.maxLagMs;
  }

  private pick(caller: string): Replica | undefined {
    if (!this.hasReplicas || this.inFlight.has(caller)) return undefined;
    const now = this.now();
    const wrote = this.lastWrite.get(caller);
    for (let i = 0; i < this.replicas.length; i++) {
      const replica = this.replicas[(this.next + i) % this.replicas.length]!;
      if (!this.fresh(replica, now)) continue;
      if (wrote !== undefined && replica.freshAsOf <= wrote) continue;
      this.next = (this.next + i + 1) % this.replicas.length;
      return replica;
    }
    return undefined;
  }

  /** One round of checks: a primary sample, then each replica's replay position. */
  check(): Promise<void> {
    this.checking ??= this.checkOnce().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  private async checkOnce(): Promise<void> {
    const timeout = this.options.checkTimeoutMs ?? 1000;
    const within = <T>(promise: Promise<T>): Promise<T> =>
      Promise.race([promise, new Promise<T>((_, reject) => setTimeout(() => reject(Object.assign(new Error('timeout expired'), { code: 'ETIMEDOUT' })), timeout).unref())]);
    const at = this.now();
    try {
      const { rows } = await within(this.primary.raw('SELECT pg_current_wal_lsn()::text AS lsn'));
      this.samples.push({ at, lsn: parseLsn((rows as Array<{ lsn: string }>)[0]!.lsn) });
    } catch {
      // No sample this round: replicas keep their freshness and age past the bound if this lasts.
    }
    // Samples older than the bound can no longer make a replica usable, except the newest such one.
    const horizon = this.now() - this.options.maxLagMs;
    while (this.samples.length > 1 && this.samples[1]!.at < horizon) this.samples.shift();
    // A write older than every sample kept no longer holds its caller back from a fresh replica.
    for (const [caller, wrote] of this.lastWrite) if (wrote < horizon - 60_000) this.lastWrite.delete(caller);
    await Promise.all(
      this.replicas.map(async (replica) => {
        try {
          const { rows } = await within(replica.db.raw('SELECT pg_is_in_recovery() AS recovering, pg_last_wal_replay_lsn()::text AS lsn'));
          const row = (rows as Array<{ recovering: boolean; lsn: string | null }>)[0]!;
          // A promoted replica is another timeline, no longer a copy of the primary.
          replica.up = row.recovering && row.lsn !== null;
          if (!replica.up) return;
          replica.lastCheckOk = this.now();
          const replayed = parseLsn(row.lsn!);
          for (let i = this.samples.length - 1; i >= 0; i--) {
            if (this.samples[i]!.lsn <= replayed) {
              replica.freshAsOf = Math.max(replica.freshAsOf, this.samples[i]!.at);
              break;
            }
          }
        } catch (error) {
          replica.up = false;
          this.options.onError?.(replica.name, error);
        }
      }),
    );
  }
}
