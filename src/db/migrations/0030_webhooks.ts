import type { Knex } from 'knex';

const ts = (t: Knex.CreateTableBuilder, name: string) => t.timestamp(name, { useTz: true, precision: 3 });

export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('webhook_endpoints', (t) => {
    t.text('id').primary();
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('name').notNullable();
    t.text('url').notNullable();
    // Empty = every event, including types added later.
    t.specificType('events', 'text[]').notNullable().defaultTo('{}');
    t.boolean('enabled').notNullable().defaultTo(true);
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    // Soft delete: the endpoint disappears from the API but its delivery history stays inspectable.
    ts(t, 'deleted_at');
  });
  await db.raw('CREATE INDEX webhook_endpoints_org_live ON webhook_endpoints (org_id, created_at DESC, id DESC) WHERE deleted_at IS NULL');

  await db.schema.createTable('webhook_events', (t) => {
    // EVT_…: the `webhook-id` header, the receivers' idempotency key.
    t.text('id').primary();
    // Monotonic cursor for `webhook listen` (ids are random, timestamps can tie).
    t.bigIncrements('seq', { primaryKey: false });
    t.text('org_id').notNullable().references('id').inTable('organizations').onDelete('CASCADE');
    t.text('type').notNullable();
    // The envelope's `data` object; the envelope itself is rendered per endpoint at each attempt.
    t.jsonb('payload').notNullable();
    ts(t, 'created_at').notNullable();
    t.index(['org_id', 'seq']);
  });

  await db.schema.createTable('webhook_deliveries', (t) => {
    t.text('id').primary();
    t.text('event_id').notNullable().references('id').inTable('webhook_events').onDelete('CASCADE');
    t.text('endpoint_id').notNullable().references('id').inTable('webhook_endpoints').onDelete('CASCADE');
    t.text('org_id').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    // Attempts started (a claim counts: an abandoned attempt may have reached the receiver).
    t.integer('attempt_count').notNullable().defaultTo(0);
    ts(t, 'next_attempt_at').notNullable();
    // Set by a claim; a worker that dies leaves it behind and the delivery is due again once it passes.
    ts(t, 'lease_until');
    // Only the holder of the current lease may record the outcome.
    t.text('lease_token');
    t.integer('last_status_code');
    t.text('last_error');
    ts(t, 'created_at').notNullable();
    ts(t, 'updated_at').notNullable();
    ts(t, 'completed_at');
    t.index(['event_id']);
    t.index(['org_id', 'created_at']);
    t.index(['endpoint_id', 'status']);
  });
  await db.raw(`ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status CHECK (status IN ('pending', 'succeeded', 'failed'))`);
  // The claim scan: only pending rows, in due order.
  await db.raw(`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);

  await db.schema.createTable('webhook_attempts', (t) => {
    t.bigIncrements('id');
    t.text('delivery_id').notNullable().references('id').inTable('webhook_deliveries').onDelete('CASCADE');
    t.integer('attempt_number').notNullable();
    t.text('url').notNullable();
    // Null when no HTTP response arrived (transport error, timeout, refused address, abandoned).
    t.integer('status_code');
    t.integer('duration_ms').notNullable();
    // First bytes of the response, for debugging a receiver; never parsed.
    t.text('response_body');
    t.text('error');
    ts(t, 'attempted_at').notNullable();
    t.index(['delivery_id', 'attempt_number']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTable('webhook_attempts');
  await db.schema.dropTable('webhook_deliveries');
  await db.schema.dropTable('webhook_events');
  await db.schema.dropTable('webhook_endpoints');
}
