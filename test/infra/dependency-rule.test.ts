import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// The dependency rule (docs/architecture.md) is enforced by dependency-cruiser in `npm test`. This
// runs the real configuration over a fixture tree with two forbidden imports and checks that the run
// fails with lines naming the broken rules, so a rule that stopped matching would be noticed.
const root = fileURLToPath(new URL("../../", import.meta.url));
const fixture = fileURLToPath(new URL("../fixtures/dependency-rule/", import.meta.url));
const depcruise = `${root}node_modules/dependency-cruiser/bin/dependency-cruise.mjs`;

function cruise(cwd: string, paths: string[], config: string): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [depcruise, ...paths, "--config", config], {
    cwd,
    encoding: "utf8",
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe("the dependency rule", () => {
  const broken = cruise(fixture, ["api", "shared"], `${root}.dependency-cruiser.cjs`);

  it("fails the run on a forbidden import", () => {
    expect(broken.status, broken.output).not.toBe(0);
  });

  it("names the broken direction between contexts", () => {
    expect(broken.output).toMatch(
      /error catalog-depends-only-on-audit-outbox-identity-money-tools: shared\/catalog\/ranking\.ts → shared\/routing\/index\.ts/,
    );
  });

  it("names the broken public surface when api/ reaches a store", () => {
    expect(broken.output).toMatch(
      /error outside-code-uses-a-context-index: api\/listings\.ts → shared\/catalog\/store\/listings\.ts/,
    );
  });

  it("names a store that api/ reaches through a re-export in the context's index", () => {
    const reach = spawnSync(process.execPath, [`${root}scripts/check-store-reach.mjs`, fixture], {
      encoding: "utf8",
    });
    expect(reach.status).not.toBe(0);
    expect(reach.stderr).toMatch(
      /error api-and-workers-never-use-a-store: api\/listing-page\.ts → shared\/catalog\/store\/listings\.ts \(findListing, through shared\/catalog\/index\.ts\)/,
    );
    expect(reach.stderr).not.toMatch(/api\/listings\.ts/);
  });

  it("passes the real tree", () => {
    const real = cruise(root, ["api", "workers", "shared", "bench"], ".dependency-cruiser.cjs");
    expect(real.status, real.output).toBe(0);
    const reach = spawnSync(process.execPath, [`${root}scripts/check-store-reach.mjs`, root], {
      encoding: "utf8",
    });
    expect(reach.status, reach.stderr).toBe(0);
  });
});
