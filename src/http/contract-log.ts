/**
 * Contract coverage recording (tests and CI only): when KASSA_CONTRACT_LOG names a folder, every
 * answer of an operation appends `operationId status` to `<folder>/<pid>.log`, one file per
 * process so parallel test workers never interleave lines. `npm run coverage:contract` then
 * compares these pairs with every operation × documented status of openapi/*.yaml. Unset (the
 * default, and always in production), nothing is recorded and nothing is touched on disk.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';

export type ContractRecorder = (operationId: string, status: number) => void;

export function contractRecorder(env: NodeJS.ProcessEnv = process.env): ContractRecorder | undefined {
  const dir = env.KASSA_CONTRACT_LOG;
  if (!dir) return undefined;
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${process.pid}.log`);
  // Synchronous on purpose: a worker that exits right after its last test loses no line.
  return (operationId, status) => appendFileSync(file, `${operationId} ${status}\n`);
}
