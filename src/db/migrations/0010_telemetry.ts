import type { Knex } from 'knex';

/**
 * Telemetry: projects, their API keys, traces (with their spans), model calls, metric points,
 * metric rollups, the monthly usage counter behind the trace quota and the per-key rate-limit
 * windows.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('telemetry_projects', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('slug').notNullable();
    t.text('environment').notNullable().checkIn(['development', 'staging', 'production'], 'telemetry_projects_environment');
    t.text('description');
    t.double('sample_rate').notNullable().defaultTo(1);
    t.integer('data_retention_days').notNullable().defaultTo(30);
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable();
    t.unique(['org_id', 'slug']);
    t.index(['org_id', 'created_at']);
  });

  await db.schema.createTable('telemetry_api_keys', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    // A project with active keys cannot be deleted; its revoked keys go with it.
    t.text('project_id').notNullable().references('id').inTable('telemetry_projects').onDelete('CASCADE');
    t.text('name').notNullable();
    // SHA-256 of the key: the key itself is never stored.
    t.text('key_hash').notNullable().unique();
    t.text('prefix').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('revoked_at', { useTz: true, precision: 3 });
    t.index(['org_id', 'created_at']);
    t.index(['project_id']);
  });

  // One row per stored trace: its summary (kept in step at ingest, so searching never aggregates)
  // and its spans as one JSON document keyed by span id inside. A trace is written as one row and
  // one index entry instead of one per span, which keeps ingest's writes per span small;
  // re-sending a span replaces it inside the document. Ids are lowercase hex, compared bytewise.
  await db.schema.createTable('telemetry_traces', (t) => {
    t.specificType('project_id', 'text COLLATE "C"').notNullable().references('id').inTable('telemetry_projects').onDelete('CASCADE');
    t.specificType('trace_id', 'text COLLATE "C"').notNullable();
    t.timestamp('start_time', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('end_time', { useTz: true, precision: 3 }).notNullable();
    t.integer('duration_ms').notNullable();
    t.integer('span_count').notNullable();
    t.text('root_name').notNullable();
    // JSON text as produced by the service; never queried inside, so no jsonb conversion.
    t.text('root_attributes').notNullable();
    t.text('model');
    t.specificType('models', 'text[]').notNullable();
    t.bigInteger('tokens_input').notNullable();
    t.bigInteger('tokens_output').notNullable();
    t.double('cost').notNullable();
    t.boolean('has_error').notNullable();
    // [{s: span id, p: parent, n: name, k: kind, st/et: epoch ms, c: status, m: message, a: attributes}]
    t.text('spans').notNullable();
    // First ingestion: project stats count traces by it.
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable();
    t.primary(['project_id', 'trace_id']);
  });
  await db.raw('CREATE INDEX telemetry_traces_search ON telemetry_traces (project_id, start_time DESC, trace_id DESC)');
  await db.raw('CREATE INDEX telemetry_traces_created ON telemetry_traces (project_id, created_at)');
  // lz4 is cheaper than the default pglz for large span documents, where the server has it.
  await db.raw(`DO $$ BEGIN
    EXECUTE 'ALTER TABLE telemetry_traces ALTER COLUMN spans SET COMPRESSION lz4';
  EXCEPTION WHEN others THEN NULL;
  END $$`);

  // One narrow row per model-call span, in time order: the raw samples behind metric edges finer
  // than a minute and rollup recomputation. Replaced on re-send (found by start time + ids).
  await db.schema.createTable('telemetry_model_calls', (t) => {
    t.specificType('project_id', 'text COLLATE "C"').notNullable().references('id').inTable('telemetry_projects').onDelete('CASCADE');
    t.timestamp('start_time', { useTz: true, precision: 3 }).notNullable();
    t.specificType('trace_id', 'text COLLATE "C"').notNullable();
    t.specificType('span_id', 'text COLLATE "C"').notNullable();
    t.text('model').notNullable();
    t.text('vendor');
    t.integer('duration_ms').notNullable();
    t.bigInteger('tokens_input');
    t.bigInteger('tokens_output');
    t.double('cost');
    t.boolean('is_error').notNullable();
    t.index(['project_id', 'start_time']);
  });

  await db.schema.createTable('telemetry_metric_points', (t) => {
    t.bigIncrements('id').primary();
    t.text('project_id').notNullable().references('id').inTable('telemetry_projects').onDelete('CASCADE');
    t.text('name').notNullable();
    t.double('value').notNullable();
    t.timestamp('timestamp', { useTz: true, precision: 3 }).notNullable();
    t.jsonb('attributes').notNullable();
    t.index(['project_id', 'timestamp']);
  });

  // Model-call metrics pre-aggregated per minute ('m'), hour ('h') and UTC day ('d'), per model
  // and vendor ('' when absent). Each dist_* column holds count/sum/min/max and a DDSketch of one
  // distribution (src/telemetry/cell-stats.ts); all of it merges, so any aligned range is a merge.
  await db.schema.createTable('telemetry_rollups', (t) => {
    t.specificType('project_id', 'text COLLATE "C"').notNullable().references('id').inTable('telemetry_projects').onDelete('CASCADE');
    // 'm' | 'h' | 'd' (text, not char(1): compared with text parameters, char(1) would not use the key).
    t.specificType('resolution', 'text COLLATE "C"').notNullable();
    t.timestamp('bucket_start', { useTz: true, precision: 3 }).notNullable();
    t.text('model').notNullable();
    t.text('vendor').notNullable();
    t.bigInteger('requests').notNullable();
    t.bigInteger('errors').notNullable();
    // One column per distribution, so a query reads only the one it aggregates.
    for (const column of ['dist_latency', 'dist_tokens_input', 'dist_tokens_output', 'dist_tokens_total', 'dist_cost']) {
      t.binary(column).notNullable();
    }
    t.primary(['project_id', 'resolution', 'bucket_start', 'model', 'vendor']);
  });
  // The current minute/hour/day cells are rewritten by every batch: room on the page keeps those
  // updates HOT (no index churn, dead versions pruned in place).
  await db.raw('ALTER TABLE telemetry_rollups SET (fillfactor = 50)');

  // Traces stored per organization and calendar month (UTC): the quota counter. Not decreased
  // by deletion, so deleting data does not buy more quota within the month.
  await db.schema.createTable('telemetry_usage', (t) => {
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.date('month').notNullable();
    t.bigInteger('traces').notNullable();
    t.primary(['org_id', 'month']);
  });
  await db.raw('ALTER TABLE telemetry_usage SET (fillfactor = 50)');

  // Fixed-window request counters per key, shared by every API process.
  await db.schema.createTable('telemetry_rate_limits', (t) => {
    t.text('key_id').notNullable().references('id').inTable('telemetry_api_keys').onDelete('CASCADE');
    t.timestamp('window_start', { useTz: true, precision: 3 }).notNullable();
    t.integer('count').notNullable();
    t.primary(['key_id', 'window_start']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('telemetry_rate_limits');
  await db.schema.dropTable('telemetry_usage');
  await db.schema.dropTable('telemetry_rollups');
  await db.schema.dropTable('telemetry_metric_points');
  await db.schema.dropTable('telemetry_model_calls');
  await db.schema.dropTable('telemetry_traces');
  await db.schema.dropTable('telemetry_api_keys');
  await db.schema.dropTable('telemetry_projects');
}
