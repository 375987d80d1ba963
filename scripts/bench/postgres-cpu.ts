/**
 * CPU time of the PostgreSQL processes serving one database, read from /proc: the benchmarks
 * print it per request next to the server's own, because on a shared machine req/s depends on
 * what the database costs as much as on what the server costs.
 */
import { readFile } from 'node:fs/promises';
import type pg from 'pg';

/**
 * CPU seconds (user + system) used so far by the backends connected to `database` (other than
 * `client`'s own) and the shared writer processes; null when PostgreSQL runs on another machine.
 * A backend that exits between two readings takes its time with it: keep the pool steady.
 */
export async function postgresCpuSeconds(client: pg.Client, database: string): Promise<number | null> {
  const { rows } = await client.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
      WHERE (datname = $1 AND pid <> pg_backend_pid()) OR backend_type IN ('walwriter', 'background writer', 'checkpointer')`,
    [database],
  );
  let ticks = 0;
  try {
    for (const { pid } of rows) {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
    }
  } catch {
    return null; // PostgreSQL on another machine (or /proc unreadable)
  }
  return ticks / 100; // USER_HZ
}

/**
 * The same CPU seconds split in two: the backends connected to `database` (its statements, its
 * autovacuum workers), and the server's shared writers (WAL writer, background writer,
 * checkpointer), which work for every database of the server — on a shared server their share
 * is not this database's alone. null when PostgreSQL runs on another machine.
 */
export async function postgresCpuSplit(client: pg.Client, database: string): Promise<{ backends: number; writers: number } | null> {
  const { rows } = await client.query<{ pid: number; writer: boolean }>(
    `SELECT pid, backend_type IN ('walwriter', 'background writer', 'checkpointer') AS writer FROM pg_stat_activity
      WHERE (datname = $1 AND pid <> pg_backend_pid()) OR backend_type IN ('walwriter', 'background writer', 'checkpointer')`,
    [database],
  );
  const split = { backends: 0, writers: 0 };
  try {
    for (const { pid, writer } of rows) {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      split[writer ? 'writers' : 'backends'] += (Number(fields[11]) + Number(fields[12])) / 100;
    }
  } catch {
    return null;
  }
  return split;
}
