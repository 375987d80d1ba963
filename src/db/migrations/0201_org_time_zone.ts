/**
 * An organization's time zone (issue 30): the IANA name the console's home page buckets its
 * commerce metrics in ("today", days, months) and says it does. Every organization, existing or
 * new, starts at 'UTC' (decision: a server cannot know where a merchant is; UTC is what the API's
 * own `time_zone` parameter defaults to, so the console and an API key read the same figures until
 * the owner picks a zone). The name is validated by the service (Intl); the column only bounds it.
 */
import type { Knex } from 'knex';

export async function up(db: Knex): Promise<void> {
  await db.raw(`ALTER TABLE organizations ADD COLUMN time_zone text NOT NULL DEFAULT 'UTC' CHECK (length(time_zone) BETWEEN 1 AND 64)`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('ALTER TABLE organizations DROP COLUMN time_zone');
}
