/**
 * The checkout benchmark's server: Kassa started exactly as `npm start --role api` starts it,
 * plus the floor route (tools/bench-floor.ts) on the merchant listener, which the product never mounts.
 */
import { boot } from '../../src/boot.js';
import { BenchFloorRepository, registerBenchFloor } from '../../tools/bench-floor.js';

boot({ merchantRoutes: (router, deps) => registerBenchFloor(router, new BenchFloorRepository(deps.database.db), deps.clock) });
