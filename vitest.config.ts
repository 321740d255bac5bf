import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The two long reliability files (chaos and fuzz, two to three minutes each on a slow machine) start
 * first: started last, as a fresh clone's size order put them, each ran alone at the end for its whole
 * length while the other forks sat idle.
 */
class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const long = (f: TestSpecification) => f.moduleId.includes("/test/reliability/");
    return [...sorted.filter(long), ...sorted.filter((f) => !long(f))];
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/helpers/global-setup.ts"],
    setupFiles: ["test/helpers/setup-env.ts"],
    pool: "forks",
    // Three forks whatever the core count. Vitest's default is one fewer than the cores, which is one on
    // our 2-core machines: the files ran one at a time, 16-19 minutes on a slow machine, although they
    // spend most of their time waiting on PostgreSQL, Redis, a chain or a child process. Every file has
    // its own port, BullMQ prefix and rows (docs/testing.md), so they run side by side.
    maxWorkers: 3,
    minWorkers: 1,
    sequence: { sequencer: LongFilesFirst },
    reporters: ["default", ["json", { outputFile: ".vitest-results.json" }]],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
