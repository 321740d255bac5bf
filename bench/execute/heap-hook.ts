import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";

/**
 * BENCH_HEAP_PROFILE=1 loads this module into the service under test (`node --import`): the first
 * SIGUSR2 starts V8's sampling heap profiler, the second stops it and writes the profile to
 * BENCH_HEAP_PROFILE_FILE. Unlike `--heap-prof`, which keeps only what is still alive at its end, it
 * keeps the samples of objects the collector has freed since (young and old generation), so the profile
 * says what each function allocated over the window, garbage included: what feeds the scavenges an
 * execute pays for. Bench-only: sampling costs CPU while it runs.
 */

const file = process.env.BENCH_HEAP_PROFILE_FILE;
if (file) {
  const session = new Session();
  session.connect();
  let sampling = false;
  process.on("SIGUSR2", () => {
    if (!sampling) {
      sampling = true;
      // One sample per 1 KB allocated on average (V8's default is 32 KB): an execute allocates ~300 KB.
      session.post("HeapProfiler.startSampling", {
        samplingInterval: 1024,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
      return;
    }
    session.post("HeapProfiler.stopSampling", (error, answer) => {
      if (error) console.error("the heap profile could not be taken", error);
      else writeFileSync(file, JSON.stringify(answer.profile));
    });
  });
}
