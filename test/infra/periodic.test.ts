import { expect, it } from "vitest";
import { runPeriodically } from "../../shared/infra/periodic.js";

// The timer every sweep runs on (shared/infra/periodic.ts): one pass at a time, and a stop that waits
// for the pass under way.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("skips the ticks that fall while a pass runs, and stops only once the pass under way has ended", async () => {
  let started = 0;
  let ended = 0;
  let inFlight = 0;
  let mostInFlight = 0;
  const sweep = runPeriodically(10, async () => {
    started += 1;
    inFlight += 1;
    mostInFlight = Math.max(mostInFlight, inFlight);
    await sleep(60);
    inFlight -= 1;
    ended += 1;
  });
  await sleep(150);
  expect(mostInFlight).toBe(1);
  // About one pass per 60 ms, not one per 10 ms tick.
  expect(started).toBeGreaterThanOrEqual(1);
  expect(started).toBeLessThanOrEqual(3);
  await sweep.stop();
  expect(ended).toBe(started);
  const after = started;
  await sleep(50);
  expect(started).toBe(after);
});
