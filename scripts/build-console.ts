/**
 * `npm run build:console` (also run by `npm install`'s postinstall): builds the browser console
 * into web/dist/ when its sources changed; `--force` rebuilds regardless.
 */
import { buildConsole } from '../src/console/build.js';

const started = performance.now();
const result = await buildConsole({ force: process.argv.includes('--force') });
const took = Math.round(performance.now() - started);
console.log(result.built ? `console built in ${took} ms: web/dist/${result.script}, web/dist/${result.style}` : 'console up to date (web/dist/)');
