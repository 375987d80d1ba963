import { PGlite } from '@electric-sql/pglite';
const t0 = Date.now();
console.log('start');
const pg = new PGlite();
await pg.waitReady;
console.log('boot', Date.now()-t0);
console.log((await pg.query('select 1 as x')).rows);
