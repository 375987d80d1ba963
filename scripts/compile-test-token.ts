/**
 * Compiles test/crypto-payments/fixtures/TestToken.sol with solc-js (the `solc` npm package: no compiler
 * download) into test/crypto-payments/fixtures/TestToken.json. Run once after editing the contract:
 *   npx tsx scripts/compile-test-token.ts
 * The tests read the committed artifact, so they never compile anything.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const solc = require('solc') as { compile(input: string): string; version(): string };

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../test/crypto-payments/fixtures');
const source = readFileSync(path.join(dir, 'TestToken.sol'), 'utf8');
const input = {
  language: 'Solidity',
  sources: { 'TestToken.sol': { content: source } },
  settings: {
    // Paris: no PUSH0/MCOPY, so the bytecode runs on any EVM the tests may point at.
    evmVersion: 'paris',
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input))) as {
  errors?: { severity: string; formattedMessage: string }[];
  contracts: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string } } }>>;
};
const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
if (errors.length > 0) {
  for (const e of errors) console.error(e.formattedMessage);
  process.exit(1);
}
const contract = output.contracts['TestToken.sol']!['TestToken']!;
const artifact = { contractName: 'TestToken', compiler: `solc-js ${solc.version()}`, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
writeFileSync(path.join(dir, 'TestToken.json'), `${JSON.stringify(artifact, null, 2)}\n`);
console.log(`wrote ${path.join(dir, 'TestToken.json')} (${artifact.compiler})`);
