import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { allocationsOf, type HeapProfile } from "../../bench/execute/heap-profile.js";

// BENCH_HEAP_PROFILE=1 (bench/execute/heap-profile.ts, docs/benchmarks.md "The twenty-fourth round"):
// the hook samples what a process allocates between two SIGUSR2, garbage included, and the summary
// charges each sample to the function that allocated it. The round's finding rests on both.

const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0 });

describe("the heap profile of bench:execute", () => {
  it("charges each sample to the function that allocated it, and to its package or file", () => {
    const profile: HeapProfile = {
      head: {
        id: 1,
        callFrame: frame("(root)", ""),
        children: [
          {
            id: 2,
            callFrame: frame("query", "file:///x/node_modules/pg/lib/client.js"),
            children: [
              { id: 3, callFrame: frame("Query", "file:///x/node_modules/pg/lib/query.js"), children: [] },
            ],
          },
          { id: 4, callFrame: frame("post", "file:///x/node_modules/@scope/lib/index.js"), children: [] },
        ],
      },
      samples: [
        { size: 100, nodeId: 3 },
        { size: 50, nodeId: 3 },
        { size: 30, nodeId: 2 },
        { size: 20, nodeId: 4 },
        { size: 999, nodeId: 99 }, // a node the tree does not hold: not counted
      ],
    };
    const { total, byFunction, byPlace } = allocationsOf(profile);
    expect(total).toBe(200);
    expect(byFunction.get("Query  pg:1")).toBe(150);
    expect(byFunction.get("query  pg:1")).toBe(30);
    expect(byPlace.get("pg")).toBe(180);
    expect(byPlace.get("@scope/lib")).toBe(20);
  });

  it("keeps what the collector freed: a function's garbage shows though nothing of it is alive", () => {
    const hook = fileURLToPath(new URL("../../dist/bench/execute/heap-hook.js", import.meta.url));
    const file = join(mkdtempSync(join(os.tmpdir(), "heap-hook-test-")), "heap.heapprofile");
    const script = `
      function makeGarbage() {
        // ~10 MB in batches of 1,000 objects, each batch dropped: garbage by the time the profile stops.
        let batch = [];
        for (let i = 0; i < 200000; i++) {
          batch.push({ i, text: "item " + i });
          if (batch.length === 1000) batch = [];
        }
        return batch.length;
      }
      process.kill(process.pid, "SIGUSR2");
      setTimeout(() => {
        makeGarbage();
        process.kill(process.pid, "SIGUSR2");
        setTimeout(() => process.exit(0), 200);
      }, 20);`;
    const run = spawnSync(process.execPath, ["--import", hook, "-e", script], {
      env: { ...process.env, BENCH_HEAP_PROFILE_FILE: file },
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status, run.stderr).toBe(0);
    const { byFunction } = allocationsOf(JSON.parse(readFileSync(file, "utf8")) as HeapProfile);
    const garbage = [...byFunction].find(([label]) => label.startsWith("makeGarbage"))?.[1] ?? 0;
    expect(garbage).toBeGreaterThan(2_000_000);
  });
});
