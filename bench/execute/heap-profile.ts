import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { fixed, log } from "../lib.js";
import { type CallFrame, labelOf, placeOf, printTops } from "./cpu-profile.js";

/**
 * BENCH_HEAP_PROFILE=1: what the service allocated per execute over the load window, by the function
 * that allocated it and by npm package or our own compiled file, from V8's sampling heap profile
 * (bench/execute/heap-hook.ts keeps the samples of freed objects too). Found knex's per-transaction
 * object, a paid execute's largest allocation (docs/benchmarks.md "The twenty-fourth round").
 */

export const HEAP_HOOK = fileURLToPath(new URL("./heap-hook.js", import.meta.url));

interface HeapNode {
  id: number;
  callFrame: CallFrame;
  children: HeapNode[];
}

export interface HeapProfile {
  head: HeapNode;
  samples: { size: number; nodeId: number }[];
}

/** What a profile's samples add up to: bytes in all, by function (label) and by package or file. */
export function allocationsOf(profile: HeapProfile): {
  total: number;
  byFunction: Map<string, number>;
  byPlace: Map<string, number>;
} {
  const frames = new Map<number, CallFrame>();
  const walk = (node: HeapNode) => {
    frames.set(node.id, node.callFrame);
    for (const child of node.children) walk(child);
  };
  walk(profile.head);
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  let total = 0;
  for (const sample of profile.samples) {
    const frame = frames.get(sample.nodeId);
    if (!frame) continue;
    total += sample.size;
    const fn = labelOf(frame);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + sample.size);
    const place = placeOf(frame);
    byPlace.set(place, (byPlace.get(place) ?? 0) + sample.size);
  }
  return { total, byFunction, byPlace };
}

/** Prints bytes allocated per execute: in all, and the top functions and places by what they allocated. */
export function summariseHeapProfile(path: string, executes: number): void {
  const tally = allocationsOf(JSON.parse(readFileSync(path, "utf8")) as HeapProfile);
  const perExecute = (bytes: number) => fixed(bytes / executes / 1024, 1);
  log();
  log(
    `Heap allocated by the service over the load window: ${perExecute(tally.total)} KB per execute (${executes} executes)`,
  );
  log(
    "  sampled (one sample per ~1 KB), freed objects included; a function's own allocations, not its callees'",
  );
  printTops(tally, "what they allocated", "KB/execute", perExecute);
  log(`profile: ${path} (open it in Chrome DevTools → Memory, or VS Code)`);
}
