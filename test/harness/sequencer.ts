/**
 * Longest test files first, by the durations of a measured run (test/durations.json), so the two
 * workers finish together instead of one running a long file alone at the end. Vitest's own order
 * knows durations only on a machine that already ran the suite (its local cache), else it goes by
 * file size. Files missing from the list go first: new or renamed, their duration is unknown.
 * Refresh the list with `npm run test:durations` (scripts/test-durations.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const seconds: Record<string, number> = JSON.parse(readFileSync(new URL('../durations.json', import.meta.url), 'utf8')).seconds;

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const duration = (spec: TestSpecification) => seconds[path.relative(root, spec.moduleId)] ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => {
      // As vitest's own order: the files of one project together.
      if (a.project.name !== b.project.name) return a.project.name < b.project.name ? -1 : 1;
      const da = duration(a);
      const db = duration(b);
      return da === db ? 0 : db > da ? 1 : -1;
    });
  }
}
