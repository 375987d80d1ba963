/**
 * Which database a knex handle reaches, for code below knex.ts (migrations): embedded PGlite or a
 * PostgreSQL server. `instanceof` holds for a transaction's handle too (its client is made from the
 * same prototype), where a check of the client's own fields does not.
 */
import type { Knex } from 'knex';
import ClientPgLite from 'knex-pglite';

export const isEmbedded = (db: Knex): boolean => db.client instanceof ClientPgLite;
