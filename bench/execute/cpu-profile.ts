import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { fixed, log, loud, table } from "../lib.js";

/**
 * BENCH_CPU_PROFILE=1: the service's V8 CPU profile (`--cpu-prof`), summarised over the samples of the
 * load window only (startup, warm-up and shutdown excluded): the functions with the most self time,
 * and self time grouped by npm package or by our own compiled file.
 *
 * V8 stamps samples on the monotonic clock, the one process.hrtime reads on the same machine, so the
 * bench's own hrtime at the start and end of the load selects the samples.
 */

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface Profile {
  nodes: { id: number; callFrame: CallFrame }[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The monotonic clock in microseconds, as V8 stamps its samples. */
export const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n);

/** The newest .cpuprofile in the directory (the service writes one when it exits). */
export function findProfile(dir: string): string | undefined {
  const files = readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"));
  return files.length > 0 ? join(dir, files.sort().at(-1)!) : undefined;
}

/** Where a frame's code lives: an npm package, our compiled file, a node: module, or V8 itself. */
export function placeOf(frame: CallFrame): string {
  const url = frame.url;
  if (!url) return frame.functionName.startsWith("(") ? frame.functionName : "(native)";
  if (url.startsWith("node:")) return "node: built-ins";
  const path = url.startsWith("file://") ? fileURLToPath(url) : url;
  const nm = path.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = path.slice(nm + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  return relative(REPO_ROOT, path);
}

export function labelOf(frame: CallFrame): string {
  const name = frame.functionName || "(anonymous)";
  if (!frame.url) return name;
  const place = frame.url.startsWith("node:") ? frame.url : placeOf(frame);
  return `${name}  ${place}:${frame.lineNumber + 1}`;
}

/** Prints the top functions and places by self time over the samples between `from` and `to` (µs). */
export function summariseProfile(path: string, from: number, to: number): void {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile;
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  if (from < profile.startTime || to > profile.endTime)
    loud(
      "the load window is not inside the profile's time range (clocks differ?): summarising every sample instead",
    );
  const inRange = from >= profile.startTime && to <= profile.endTime;
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  let total = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    // A sample stands for the time until the next one.
    const self = profile.timeDeltas[i + 1] ?? 0;
    if (inRange && (at < from || at > to)) continue;
    const frame = frames.get(profile.samples[i]!);
    if (!frame) continue;
    total += self;
    const fn = labelOf(frame);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + self);
    const place = placeOf(frame);
    byPlace.set(place, (byPlace.get(place) ?? 0) + self);
  }
  log();
  log(`CPU profile of the service over the load window: ${fixed(total / 1e6, 2)} s of samples`);
  log("  (idle) is time the main thread waited; (program) native code outside JS; (garbage collector) GC");
  printTops({ byFunction, byPlace, total }, "self time", "self ms", (us) => fixed(us / 1000, 0));
  log(`profile: ${path} (open it in Chrome DevTools → Performance, or VS Code)`);
}

/**
 * Prints a profile's top 25 functions and top 15 packages / files by what it tallied for each (`by`,
 * shown in `column` as `shown` writes it), with each one's share of the total.
 */
export function printTops(
  tally: { byFunction: Map<string, number>; byPlace: Map<string, number>; total: number },
  by: string,
  column: string,
  shown: (value: number) => string,
): void {
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, value]) => [name, shown(value), fixed((100 * value) / tally.total, 1)]);
  log();
  log(`Top 25 functions by ${by}`);
  log(table(["function  place:line", column, "%"], top(tally.byFunction, 25)));
  log();
  log(`Top 15 packages / files by ${by}`);
  log(table(["package or file", column, "%"], top(tally.byPlace, 15)));
  log();
}
