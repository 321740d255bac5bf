import { expect, it } from "vitest";
import {
  machineTimes,
  machineTimesFromProcStat,
  readThreads,
  switchesFromProcStatus,
} from "../../bench/lib/cpu.js";

// The benches' machine-wide CPU figures (bench/lib/cpu.ts): busy and steal shares of a run are read off
// /proc/stat's first line (docs/benchmarks.md "The fifteenth round" says what steal tells); a process's
// main thread is read apart from its others, with their context switches ("The seventeenth round").

const STAT = [
  "cpu  186082 7 39628 225150 5587 3 14213 11653 0 0",
  "cpu0 93041 3 19814 112575 2793 1 7106 5826 0 0",
  "intr 1 2 3",
].join("\n");

it("reads busy (user, nice, system, irq, softirq), steal and the total off the cpu line", () => {
  const busy = 186082 + 7 + 39628 + 3 + 14213;
  expect(machineTimesFromProcStat(STAT)).toEqual({
    busy,
    steal: 11653,
    total: busy + 11653 + 225150 + 5587,
  });
});

it("refuses text that is not /proc/stat's, rather than reading zeros", () => {
  expect(machineTimesFromProcStat("")).toBeUndefined();
  expect(machineTimesFromProcStat("cpu0 1 2 3 4 5 6 7 8")).toBeUndefined();
  expect(machineTimesFromProcStat("cpu  1 2 3 4")).toBeUndefined();
  expect(machineTimesFromProcStat("cpu  1 2 3 4 5 6 7 x")).toBeUndefined();
});

it("reads this machine's times, which only grow", async () => {
  const before = machineTimes();
  const until = Date.now() + 30;
  while (Date.now() < until) {
    // Keep a core busy for a few ticks.
  }
  await new Promise((resolve) => setTimeout(resolve, 30));
  const after = machineTimes();
  expect(after.total).toBeGreaterThan(before.total);
  expect(after.busy).toBeGreaterThanOrEqual(before.busy);
  expect(after.steal).toBeGreaterThanOrEqual(before.steal);
  expect(after.busy + after.steal).toBeLessThanOrEqual(after.total);
});

it("reads the context switches off a /proc status text, and refuses one without them", () => {
  const status = [
    "Name:\tnode",
    "Threads:\t11",
    "voluntary_ctxt_switches:\t4417",
    "nonvoluntary_ctxt_switches:\t199",
  ].join("\n");
  expect(switchesFromProcStatus(status)).toEqual({ voluntary: 4417, involuntary: 199 });
  expect(switchesFromProcStatus("Name:\tnode\nvoluntary_ctxt_switches:\t4417")).toBeUndefined();
});

it.runIf(process.platform === "linux")(
  "charges this process's busy loop to its main thread and its sleeps to voluntary switches",
  async () => {
    const before = readThreads(process.pid)!;
    const until = Date.now() + 60;
    while (Date.now() < until) {
      // Keep the main thread busy for several ticks.
    }
    // One sleep long enough that the thread blocks in it even on a loaded machine (five 5 ms sleeps gave
    // four switches once: a thread preempted past its timer never blocks for it).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const after = readThreads(process.pid)!;
    expect(after.main.user + after.main.sys).toBeGreaterThan(before.main.user + before.main.sys);
    expect(after.main.voluntary).toBeGreaterThan(before.main.voluntary);
    expect(readThreads(2 ** 22 + 1)).toBeUndefined();
  },
);
