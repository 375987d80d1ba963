/**
 * The encryption key is checked at every start against a value it sealed at the first one: a
 * process started with another key (a typo, a restored backup, ENCRYPTION_KEY unset on one of
 * several processes) is refused with a message naming the key's source, instead of starting and
 * then answering 500 on the first sealed key it opens. Neither key is ever printed.
 */
import type { Clock } from '../kernel/clock.js';
import type { SecretBox } from '../kernel/secrets.js';
import { StartupError } from '../kernel/startup-error.js';
import { SEALED_COLUMNS, type KeyCheckRepository, type SealedSource } from './key-check.repository.js';

const CHECK_PLAINTEXT = 'kassa encryption key check v1';
const CHECK_ASSOCIATED_DATA = 'encryption_key_check';
const PAGE_SIZE = 500;

function opens(box: SecretBox, sealed: string, associatedData: string, expected?: string): boolean {
  try {
    const plaintext = box.open(sealed, associatedData);
    return expected === undefined || plaintext.toString('utf8') === expected;
  } catch {
    return false;
  }
}

const REMEDY = 'Start it with the key this database was first started with (ENCRYPTION_KEY; a restored backup needs the key of the installation it came from).';

function mismatch(keySource: string): StartupError {
  return new StartupError(`${keySource} does not match the key that sealed this database. ${REMEDY}`);
}

/** How many sealed values of each source the key opens: every one is tried, once, on an upgrade. */
async function countOpened(repo: KeyCheckRepository, box: SecretBox): Promise<Array<{ source: SealedSource; opened: number; total: number }>> {
  const counts = [];
  for (const source of Object.keys(SEALED_COLUMNS) as SealedSource[]) {
    let opened = 0;
    let total = 0;
    let afterId: string | undefined;
    for (;;) {
      const page = await repo.listSealed(source, afterId, PAGE_SIZE);
      for (const secret of page) {
        total += 1;
        if (opens(box, secret.sealed, secret.id)) opened += 1;
      }
      if (page.length < PAGE_SIZE) break;
      afterId = page[page.length - 1]!.id;
    }
    counts.push({ source, opened, total });
  }
  return counts;
}

/**
 * Verifies the key against the stored check value, or records one on a database that has none:
 * a new database, or one from before this check, whose sealed values must then all open with the
 * key (a key that opens none is the wrong one; one that opens some was not the only key used, and
 * Kassa does not pick one). Several processes may start at once: the first value stored wins and
 * every process verifies against it. Throws a StartupError naming `keySource` on a mismatch.
 */
export async function verifyEncryptionKey(deps: { repo: KeyCheckRepository; box: SecretBox; clock: Clock; keySource: string }): Promise<'verified' | 'recorded'> {
  const { repo, box, keySource } = deps;
  let stored = await repo.findCheckValue();
  if (stored === undefined) {
    const counts = await countOpened(repo, box);
    const opened = counts.reduce((sum, c) => sum + c.opened, 0);
    const total = counts.reduce((sum, c) => sum + c.total, 0);
    if (total > 0 && opened === 0) throw mismatch(keySource);
    if (opened < total) {
      const detail = counts.filter((c) => c.total > 0).map((c) => `${c.source}: ${c.opened} of ${c.total}`).join(', ');
      throw new StartupError(
        `${keySource} opens only ${opened} of the ${total} sealed keys in this database (${detail}): they were sealed with different keys. ` +
          'Kassa records which key this database uses only once one key opens them all: start it with the key that opens the others, or delete the rows that no key opens.',
      );
    }
    await repo.insertCheckValueIfAbsent(box.seal(Buffer.from(CHECK_PLAINTEXT, 'utf8'), CHECK_ASSOCIATED_DATA), deps.clock.now());
    stored = (await repo.findCheckValue())!;
    if (opens(box, stored, CHECK_ASSOCIATED_DATA, CHECK_PLAINTEXT)) return 'recorded';
    throw mismatch(keySource);
  }
  if (!opens(box, stored, CHECK_ASSOCIATED_DATA, CHECK_PLAINTEXT)) throw mismatch(keySource);
  return 'verified';
}
