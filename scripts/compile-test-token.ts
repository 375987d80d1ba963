/**
 * Compiles a test contract with solc-js (the `solc` npm package: no compiler download) into the
 * JSON artifact next to it. Run once after editing the contract:
 *   npx tsx scripts/compile-test-token.ts                                   # test/crypto-payments/fixtures/TestToken.sol
 *   npx tsx scripts/compile-test-token.ts test/x402/fixtures/Eip3009Token.sol   # the x402 tests' EIP-3009 token
 * The tests read the committed artifact, so they never compile anything.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const solc = require('solc') as { compile(input: string): string; version(): string };

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sourcePath = path.resolve(root, process.argv[2] ?? 'test/crypto-payments/fixtures/TestToken.sol');
const dir = path.dirname(sourcePath);
const file = path.basename(sourcePath);
const contractName = file.replace(/\.sol$/, '');
const source = readFileSync(sourcePath, 'utf8');
const input = {
  language: 'Solidity',
  sources: { [file]: { content: source } },
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
const contract = output.contracts[file]![contractName]!;
const artifact = { contractName, compiler: `solc-js ${solc.version()}`, abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
writeFileSync(path.join(dir, `${contractName}.json`), `${JSON.stringify(artifact, null, 2)}\n`);
console.log(`wrote ${path.join(dir, `${contractName}.json`)} (${artifact.compiler})`);
