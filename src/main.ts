/** Entry point of `npm start` and `npm run worker` (src/boot.ts does the work). */
import { boot } from './boot.js';

boot();
