/** The ingest transaction: trace writes and rollup writes over one database transaction. */
import { isPostgres, type Db } from '../db/knex.js';
import type { Clock } from '../kernel/clock.js';
import { PartitionEnsurer } from '../db/partitions.js';
import { KnexRollupWriter, type RollupWriter } from './rollups.repository.js';
import { KnexSpanMeterWriter, type SpanMeterWriter } from './span-meters.repository.js';
import { KnexTraceWriter, type TraceWriter } from './traces.repository.js';

export interface IngestTx {
  traces: TraceWriter;
  rollups: RollupWriter;
  /** The hourly rollups of the project's span meters (migration 0381). */
  spanMeters: SpanMeterWriter;
}

export interface IngestUnitOfWork {
  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T>;
}

export class KnexIngestUnitOfWork implements IngestUnitOfWork {
  /** COPY FROM STDIN needs node-postgres; PGlite takes the JSON path. */
  private readonly copy: boolean;

  /** Per database: the weekly partitions of span rows and traces already known to exist. */
  private readonly partitions = new PartitionEnsurer();

  constructor(
    private readonly db: Db,
    private readonly clock?: Clock,
  ) {
    this.copy = isPostgres(db);
  }

  transaction<T>(work: (tx: IngestTx) => Promise<T>): Promise<T> {
    return this.db.transaction((trx) => {
      const partitions = { ensurer: this.partitions, now: this.clock?.now() ?? new Date() };
      return work({ traces: new KnexTraceWriter(trx, this.copy, partitions), rollups: new KnexRollupWriter(trx, this.copy, partitions), spanMeters: new KnexSpanMeterWriter(trx) });
    });
  }
}
