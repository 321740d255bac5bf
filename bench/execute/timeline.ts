import { fileURLToPath } from "node:url";
import { mean, median } from "../lib/series.js";
import { fixed, table } from "../lib.js";
import type { TimelineEvent } from "./timeline-hook.js";

/**
 * BENCH_TIMELINE=1: an execute's critical path at c=1, segment by segment, from the stamps
 * timeline-hook.ts takes inside the service. The free execute (criticalPath) is found by its steps in
 * order: the request received, the claim written to PostgreSQL and answered, the provider call made (to
 * the service's own echo) and answered, the outcome written and answered, the answer written. The paid
 * one (paidCriticalPath, with BENCH_PROFILE_PAID=1) by its two PostgreSQL phases around the seller call:
 * the hold's flight before it and the capture's after it, each from its first write to its last answer.
 * The call gate's Redis scripts overlap the statements and are not on the path. An execute whose steps
 * cannot all be found in order (a background statement in between, say) is counted apart, not guessed
 * at.
 */

/** The hook's module, for `node --import`. */
export const TIMELINE_HOOK = fileURLToPath(new URL("./timeline-hook.js", import.meta.url));

/** The free execute's critical path's segments, in order: each runs from one step to the next. */
export const SEGMENTS = [
  "request received → claim sent",
  "claim: PostgreSQL round trip",
  "claim answered → provider call sent",
  "provider call (sent → answer read)",
  "provider answer read → outcome sent",
  "outcome: PostgreSQL round trip",
  "outcome answered → execute answer written",
] as const;

/** The paid execute's: its PostgreSQL phases may take more than one round trip each (paidCriticalPath). */
export const PAID_SEGMENTS = [
  "request received → hold's flight sent",
  "hold: PostgreSQL, first write → last answer",
  "hold answered → seller call sent",
  "seller call (sent → answer read)",
  "seller answer read → capture's flight sent",
  "capture: PostgreSQL, first write → last answer",
  "capture answered → execute answer written",
] as const;

export interface CriticalPath {
  /** Which execute, and so which segments (SEGMENTS or PAID_SEGMENTS) and words the report uses. */
  kind: "free" | "paid";
  /** Executes whose every step was found in order. */
  matched: number;
  /** Executes received whose steps were not all found. */
  unmatched: number;
  /** Per segment (SEGMENTS' order), its duration in each matched execute, in microseconds. */
  segments: number[][];
  /** Each matched execute's whole path, request received → answer written, in microseconds. */
  totals: number[];
  /**
   * Paid: the flights to PostgreSQL in each matched execute's hold and capture phases: writes sent after
   * an answer or first (pg writes a flight's messages one by one, into one socket write).
   */
  flights?: { hold: number[]; capture: number[] };
}

/** The segments' names of a path of this kind. */
export function segmentNames(kind: CriticalPath["kind"]): readonly string[] {
  return kind === "free" ? SEGMENTS : PAID_SEGMENTS;
}

/** A path of this kind with nothing matched yet. */
function emptyPath(kind: CriticalPath["kind"]): CriticalPath {
  return { kind, matched: 0, unmatched: 0, segments: segmentNames(kind).map(() => []), totals: [] };
}

/** Where each execute's stamps begin: the indexes of its request received. */
function executeStarts(events: readonly TimelineEvent[], executePath: string): number[] {
  return events.flatMap((e, i) => (e[1] === `in ${executePath}` ? [i] : []));
}

/**
 * Splits the stamps into executes (each from one "in <executePath>" to the next) and measures the
 * segments of each: the steps are the first of their kind after the step before.
 */
export function criticalPath(
  events: readonly TimelineEvent[],
  paths: { execute: string; provider: string },
): CriticalPath {
  const steps = ["pg>", "pg<", "call>", `in ${paths.provider}`, "answer>", "call<", "pg>", "pg<", "answer>"];
  const result = emptyPath("free");
  const starts = executeStarts(events, paths.execute);
  for (const [n, start] of starts.entries()) {
    const end = starts[n + 1] ?? events.length;
    const at: number[] = [events[start]![0]];
    let i = start + 1;
    for (const step of steps) {
      while (i < end && events[i]![1] !== step) i += 1;
      if (i >= end) break;
      at.push(events[i]![0]);
      i += 1;
    }
    if (at.length !== steps.length + 1) {
      result.unmatched += 1;
      continue;
    }
    // at: received, claim sent, claim answered, call sent, provider received, provider answered,
    // call answered, outcome sent, outcome answered, answer written.
    const marks = [at[0]!, at[1]!, at[2]!, at[3]!, at[6]!, at[7]!, at[8]!, at[9]!];
    for (let s = 0; s < SEGMENTS.length; s++) result.segments[s]!.push(marks[s + 1]! - marks[s]!);
    result.totals.push(at[9]! - at[0]!);
    result.matched += 1;
  }
  return result;
}

/**
 * The paid execute's critical path. Its seller is another process (the hook names it "call", as the
 * service's calls to itself), so no provider request shows inside the service. Around that call, each
 * PostgreSQL phase runs from its first write to its last answer and counts its flights: a phase is
 * normally one flight, but a statement the path makes now and then (a fresh reading of the custody
 * switch, say) adds one, and it then counts inside the phase instead of hiding the hold's flight.
 */
export function paidCriticalPath(events: readonly TimelineEvent[], executePath: string): CriticalPath {
  const flights = { hold: [] as number[], capture: [] as number[] };
  const result: CriticalPath = { ...emptyPath("paid"), flights };
  const find = (kind: string, from: number, to: number): number => {
    for (let i = from; i < to; i++) if (events[i]![1] === kind) return i;
    return -1;
  };
  /** First write, last answer and the flights of the PostgreSQL phase within [from, to), if it has both. */
  const phase = (from: number, to: number): { first: number; last: number; flights: number } | undefined => {
    let first = -1;
    let last = -1;
    let flights = 0;
    let answered = true;
    for (let i = from; i < to; i++) {
      const kind = events[i]![1];
      if (kind === "pg>") {
        if (first < 0) first = i;
        if (answered) flights += 1;
        answered = false;
      } else if (kind === "pg<" && first >= 0) {
        last = i;
        answered = true;
      }
    }
    return first >= 0 && last > first ? { first, last, flights } : undefined;
  };
  const starts = executeStarts(events, executePath);
  for (const [n, start] of starts.entries()) {
    const end = starts[n + 1] ?? events.length;
    const callOut = find("call>", start + 1, end);
    const callIn = callOut < 0 ? -1 : find("call<", callOut + 1, end);
    const answer = callIn < 0 ? -1 : find("answer>", callIn + 1, end);
    const hold = callOut < 0 ? undefined : phase(start + 1, callOut);
    const capture = answer < 0 ? undefined : phase(callIn + 1, answer);
    if (!hold || !capture) {
      result.unmatched += 1;
      continue;
    }
    const marks = [start, hold.first, hold.last, callOut, callIn, capture.first, capture.last, answer].map(
      (i) => events[i]![0],
    );
    for (let s = 0; s < PAID_SEGMENTS.length; s++) result.segments[s]!.push(marks[s + 1]! - marks[s]!);
    result.totals.push(marks[7]! - marks[0]!);
    flights.hold.push(hold.flights);
    flights.capture.push(capture.flights);
    result.matched += 1;
  }
  return result;
}

/** The slowest executes of a path: how many, and each segment's mean over them (microseconds). */
export interface PathTail {
  executes: number;
  /** Per segment (SEGMENTS' order). */
  segments: number[];
  total: number;
}

/**
 * The slowest (1 − `quantile`) of the executes by whole path (0.99: the slowest 1 %, rounded, at least
 * one), and each segment's mean over them: set beside the medians, it says which segment the tail is
 * made of (a statement's round trip, the provider call, or the service's own steps).
 */
export function pathTail(path: CriticalPath, quantile = 0.99): PathTail {
  const count = Math.max(1, Math.round(path.totals.length * (1 - quantile)));
  const slowest = path.totals
    .map((total, i) => ({ total, i }))
    .sort((a, b) => b.total - a.total)
    .slice(0, count);
  return {
    executes: slowest.length,
    segments: path.segments.map((durations) => mean(slowest.map(({ i }) => durations[i]!))),
    total: mean(slowest.map(({ total }) => total)),
  };
}

/**
 * Prints the critical path's medians (ms) and shares, beside the direct call to the same provider, and
 * what the slowest 1 % of executes spent in each segment.
 */
export function printCriticalPath(path: CriticalPath, directP50Ms: number | undefined): void {
  const names = segmentNames(path.kind);
  const total = median(path.totals) / 1000;
  const tail = pathTail(path);
  const rows = names.map((name, s) => {
    const ms = median(path.segments[s]!) / 1000;
    const slow = tail.segments[s]! / 1000;
    return [name, fixed(ms, 3), `${fixed((100 * ms) / total, 0)} %`, fixed(slow, 3), fixed(slow - ms, 3)];
  });
  rows.push([
    "whole path (median of its own)",
    fixed(total, 3),
    "",
    fixed(tail.total / 1000, 3),
    fixed(tail.total / 1000 - total, 3),
  ]);
  console.log(
    `\nThe ${path.kind} execute's critical path at c=1, inside the service (medians of ${path.matched} executes; ` +
      `${path.unmatched} whose steps were not all found in order are left out; the slowest 1 %: the mean of ` +
      `its ${tail.executes} executes, and how far above the median)`,
  );
  console.log(table(["segment", "ms", "share", "slowest 1 % ms", "above median ms"], rows));
  const postgres = (median(path.segments[1]!) + median(path.segments[5]!)) / 1000;
  const provider = median(path.segments[3]!) / 1000;
  const free = path.kind === "free";
  console.log(
    `  the two PostgreSQL ${free ? "round trips" : "phases"} ${fixed(postgres, 3)} ms; the ${free ? "provider" : "seller"} ` +
      `call ${fixed(provider, 3)} ms` +
      (directP50Ms === undefined
        ? ""
        : ` (the same ${free ? "echo" : "seller"} called directly: p50 ${fixed(directP50Ms, 3)} ms)`) +
      `; the service's own steps ${fixed(total - postgres - provider, 3)} ms`,
  );
  if (path.flights)
    console.log(
      `  flights to PostgreSQL per execute: the hold's phase ${fixed(mean(path.flights.hold), 2)}, ` +
        `the capture's ${fixed(mean(path.flights.capture), 2)} (one each when each is a single flight)`,
    );
}
