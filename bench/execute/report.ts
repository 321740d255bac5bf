import { fixed, type GroupMeasurement, log, loud, median, table } from "../lib.js";

// The table and the ratios of `npm run bench:execute`: ours against the peer gateway, free and paid.

export type Group = "service" | "upstream" | "portkey" | "floor";
export type Result = GroupMeasurement<Group>;

/** The issue's targets (performance issue, item 1). */
export const TARGETS = {
  overheadMs: 2,
  overheadVsPeer: 2,
  p99Ms: 10,
  throughputVsPeer: 1,
} as const;

/** A routed scenario and the direct call it is compared with. */
export interface Pair {
  name: string;
  direct: string;
  routed: string;
  /** The routed scenario at c=32 spread over several buyers (paid), printed beside the one-buyer rate. */
  spread?: string;
}

export function printResults(results: readonly Result[]): void {
  log("Results (latency and throughput count 200 answers only)");
  log(
    table(
      ["scenario", "c", "p50 ms", "p99 ms", "requests/s", "non-2xx", "non-200 2xx", "errors"],
      results.map((m) => [
        m.scenario,
        String(m.connections),
        fixed(m.p50Ms),
        fixed(m.p99Ms),
        fixed(m.okPerSecond, 0),
        String(m.non2xx),
        String(m.other2xx),
        String(m.errors),
      ]),
    ),
  );
  log();
  log(
    "CPU during each run, in cores (machine busy % is across all cores; steal %: the machine's time its hypervisor gave to others)",
  );
  log(
    table(
      [
        "scenario",
        "c",
        "service",
        "upstream",
        "portkey",
        "floor",
        "postgres",
        "redis",
        "bench client",
        "other",
        "busy %",
        "steal %",
      ],
      results.map((m) => [
        m.scenario,
        String(m.connections),
        fixed(m.cpu.groups.service.cores),
        fixed(m.cpu.groups.upstream.cores),
        fixed(m.cpu.groups.portkey.cores),
        fixed(m.cpu.groups.floor.cores),
        fixed(m.cpu.postgres),
        fixed(m.cpu.redis),
        fixed(m.cpu.bench),
        fixed(m.cpu.other),
        fixed(m.cpu.machineBusyPct, 0),
        fixed(m.cpu.machineStealPct, 1),
      ]),
    ),
  );
  for (const m of results) {
    if (m.cpu.other < 0.2) continue;
    const who =
      m.cpu.busiestOthers.map((o) => `${o.comm} ${fixed(o.cores)}`).join(", ") ||
      "short-lived processes or the kernel";
    loud(`${m.scenario} c=${m.connections}: ${fixed(m.cpu.other)} cores used outside the bench (${who})`);
  }
  log();
  printServiceThreads(results);
}

/** Below this many cores the service did not serve the run (the peer's and the floor's rows). */
const SERVING_CORES = 0.1;

/**
 * The service's CPU and context switches per answer, its main thread (the event loop) apart from its
 * other threads, for the runs it served. It shows what the cores table cannot: at c=1 the same execute
 * costs the main thread two to three times the CPU it costs at c=32, with the same system calls
 * (docs/benchmarks.md "The seventeenth round").
 */
function printServiceThreads(results: readonly Result[]): void {
  const served = results.flatMap((m) =>
    m.cpu.threads && m.cpu.groups.service.cores >= SERVING_CORES && m.ok > 0 ? [{ m, t: m.cpu.threads }] : [],
  );
  if (served.length === 0) return;
  const perAnswer = (m: Result, value: number, scale: number, digits: number) =>
    fixed((value * scale) / m.ok, digits);
  log(
    "The service per answer: CPU of its main thread (user, system) and of its other threads, in µs; context switches of all its threads",
  );
  log(
    table(
      ["scenario", "c", "main user µs", "main sys µs", "other threads µs", "voluntary", "involuntary"],
      served.map(({ m, t }) => [
        m.scenario,
        String(m.connections),
        perAnswer(m, t.mainUserS, 1e6, 0),
        perAnswer(m, t.mainSysS, 1e6, 0),
        perAnswer(m, t.othersS, 1e6, 0),
        perAnswer(m, t.voluntary, 1, 2),
        perAnswer(m, t.involuntary, 1, 2),
      ]),
    ),
  );
  log();
}

function find(results: readonly Result[], scenario: string, connections: number): Result {
  const m = results.find((r) => r.scenario === scenario && r.connections === connections);
  if (!m) throw new Error(`no measurement for ${scenario} c=${connections}`);
  return m;
}

const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");

/** The floor's two scenarios (bench/execute/floor.ts), each against the fake provider called directly. */
export interface FloorPairs {
  bare: Pair;
  durable: Pair;
}

/**
 * Overheads at c=1, ours against the peer, and the issue's targets for each of ours; with the floor,
 * where the free execute's overhead goes (printFloor).
 */
export function printRatios(
  results: readonly Result[],
  peer: Pair,
  ours: readonly Pair[],
  floor?: FloorPairs,
): void {
  const overhead = (pair: Pair) => find(results, pair.routed, 1).p50Ms - find(results, pair.direct, 1).p50Ms;
  const peerOverhead = overhead(peer);
  const peer32 = find(results, peer.routed, 32).okPerSecond;
  log("Overhead at c=1: p50(routed) − p50(its direct call)");
  for (const pair of [peer, ...(floor ? [floor.bare, floor.durable] : []), ...ours])
    log(
      `  ${pair.name.padEnd(12)} ${fixed(overhead(pair)).padStart(7)} ms  (${pair.routed} − ${pair.direct})`,
    );
  log();
  log(
    `Targets from the issue: overhead p50 ≤ ${TARGETS.overheadMs} ms and ≤ ${TARGETS.overheadVsPeer}× the peer's; ` +
      `p99 ≤ ${TARGETS.p99Ms} ms at c=1; throughput at c=32 ≥ ${TARGETS.throughputVsPeer}× the peer's`,
  );
  for (const pair of ours) {
    const o = overhead(pair);
    const vsPeer = o / peerOverhead;
    const p99 = find(results, pair.routed, 1).p99Ms;
    const rate = find(results, pair.routed, 32).okPerSecond;
    const rateVsPeer = rate / peer32;
    log(`  ${pair.name}`);
    log(`    ${verdict(o <= TARGETS.overheadMs)}  overhead ${fixed(o)} ms ≤ ${TARGETS.overheadMs} ms`);
    log(
      `    ${verdict(vsPeer <= TARGETS.overheadVsPeer)}  overhead ours/Portkey ${fixed(o)} / ${fixed(peerOverhead)} ms ` +
        `= ${fixed(vsPeer, 1)}× ≤ ${TARGETS.overheadVsPeer}×`,
    );
    log(`    ${verdict(p99 <= TARGETS.p99Ms)}  p99 at c=1 ${fixed(p99)} ms ≤ ${TARGETS.p99Ms} ms`);
    log(
      `    ${verdict(rateVsPeer >= TARGETS.throughputVsPeer)}  throughput at c=32 ours/Portkey ` +
        `${fixed(rate, 0)} / ${fixed(peer32, 0)} /s = ${fixed(rateVsPeer, 2)}× ≥ ${TARGETS.throughputVsPeer}×`,
    );
    if (pair.spread) {
      const spread = find(results, pair.spread, 32);
      log(
        `          (${spread.scenario}: ${fixed(spread.okPerSecond, 0)} /s at c=${spread.connections}, ` +
          `${fixed(spread.okPerSecond / rate, 2)}× one buyer's, ${fixed(spread.okPerSecond / peer32, 2)}× Portkey's)`,
      );
    }
  }
  log();
  const free = ours.find((pair) => pair.name === "free");
  if (floor && free)
    printFloor({
      peer: peerOverhead,
      bare: overhead(floor.bare),
      floor: overhead(floor.durable),
      ours: overhead(free),
    });
}

/**
 * The free execute's overhead split against the floor of a durable router (c=1 overheads of this run):
 * what any proxy pays, what two durable commits add, and what is left for Portkey's and our own work.
 */
function printFloor(o: { peer: number; bare: number; floor: number; ours: number }): void {
  const line = (what: string, ms: number, note = "") =>
    log(`  ${what.padEnd(52)} ${fixed(ms).padStart(6)} ms${note ? `  ${note}` : ""}`);
  log("Where the free overhead goes, against the floor of a durable router (c=1 overheads above)");
  line("a bare Node proxy", o.bare);
  line("the floor: that proxy + two durable commits", o.floor, `(${fixed(o.floor / o.peer, 2)}× Portkey's)`);
  line("Portkey's own work above a bare proxy", o.peer - o.bare);
  line(
    "our router's own work above the floor",
    o.ours - o.floor,
    `(free ${fixed(o.ours)} − floor ${fixed(o.floor)})`,
  );
  line(
    `what ${TARGETS.overheadVsPeer}× Portkey's leaves for it above the floor`,
    TARGETS.overheadVsPeer * o.peer - o.floor,
  );
  log();
}

/** One interleaved round of the free execute against the peer (measureInterleaved in execute.ts). */
export interface InterleavedRound {
  /** Which side ran first in this round. */
  first: "ours" | "peer";
  /** c=1: the peer's direct and routed calls, ours. */
  peerDirect: Result;
  peerRouted: Result;
  /** c=1: the floor's durable proxy (bench/execute/floor.ts), in the peer's phase; when it ran. */
  floor?: Result;
  oursDirect: Result;
  oursRouted: Result;
  /** c=32: the routed calls. */
  peerRouted32: Result;
  oursRouted32: Result;
}

/** Each round's overhead and throughput ratios, and their medians. */
export function printInterleaved(rounds: readonly InterleavedRound[]): void {
  if (rounds.length === 0) return;
  const rows = rounds.map((r) => {
    const ours = r.oursRouted.p50Ms - r.oursDirect.p50Ms;
    const peer = r.peerRouted.p50Ms - r.peerDirect.p50Ms;
    return {
      first: r.first,
      ours,
      peer,
      floor: r.floor ? r.floor.p50Ms - r.peerDirect.p50Ms : undefined,
      overheadRatio: ours / peer,
      p99: r.oursRouted.p99Ms,
      rate: r.oursRouted32.okPerSecond,
      peerRate: r.peerRouted32.okPerSecond,
      rateRatio: r.oursRouted32.okPerSecond / r.peerRouted32.okPerSecond,
      // Whether the hypervisor took time during either c=1 run: a ratio moved by steal is the machine's.
      steal: `${fixed(r.oursRouted.cpu.machineStealPct, 1)} / ${fixed(r.peerRouted.cpu.machineStealPct, 1)}`,
    };
  });
  log(
    `Free execute against the peer, interleaved: ${rounds.length} more rounds, each side in turn first ` +
      "(the machine's speed drifts within a run; a pair measured back to back shares its phase)",
  );
  // The floor's columns (its overhead, and ours above it) only when every round measured it.
  const floors = rows.every((r) => r.floor !== undefined) ? rows.map((r) => r.floor!) : undefined;
  const floorCells = (floor: number | undefined, ours: number) =>
    floors && floor !== undefined ? [fixed(floor), fixed(ours - floor)] : [];
  log(
    table(
      [
        "round",
        "first",
        "overhead ours / Portkey ms",
        "ratio",
        ...(floors ? ["floor ms", "ours − floor ms"] : []),
        "p99 c=1 ms",
        "steal % c=1 ours / Portkey",
        "c=32 ours / Portkey /s",
        "ratio",
      ],
      [
        ...rows.map((r, i) => [
          String(i + 1),
          r.first,
          `${fixed(r.ours)} / ${fixed(r.peer)}`,
          `${fixed(r.overheadRatio, 1)}×`,
          ...floorCells(r.floor, r.ours),
          fixed(r.p99),
          r.steal,
          `${fixed(r.rate, 0)} / ${fixed(r.peerRate, 0)}`,
          `${fixed(r.rateRatio, 2)}×`,
        ]),
        [
          "median",
          "",
          `${fixed(median(rows.map((r) => r.ours)))} / ${fixed(median(rows.map((r) => r.peer)))}`,
          `${fixed(median(rows.map((r) => r.overheadRatio)), 1)}×`,
          ...(floors ? [fixed(median(floors)), fixed(median(rows.map((r) => r.ours - r.floor!)))] : []),
          fixed(median(rows.map((r) => r.p99))),
          "",
          `${fixed(median(rows.map((r) => r.rate)), 0)} / ${fixed(median(rows.map((r) => r.peerRate)), 0)}`,
          `${fixed(median(rows.map((r) => r.rateRatio)), 2)}×`,
        ],
      ],
    ),
  );
  log();
}
