import { expect, it } from "vitest";
import { machineTimes, machineTimesFromProcStat } from "../../bench/lib/cpu.js";

// The benches' machine-wide CPU figures (bench/lib/cpu.ts): busy and steal shares of a run are read off
// /proc/stat's first line (docs/benchmarks.md "The fifteenth round" says what steal tells).

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
