import { randomUUID } from "node:crypto";
import { UnrecoverableError, Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeQueues, enqueue, getQueueEvents, watchJob } from "../../shared/queues.js";
import { createRedis } from "../../shared/redis.js";

// The API's wait for a job's end (shared/queues.ts watchJob): one event reader per process settles every
// waiting request. The executions queue under this file's own QUEUE_PREFIX, with a stand-in worker.

let worker: Worker;
const failing = new Set<string>();

beforeAll(async () => {
  worker = new Worker(
    "executions",
    async (job) => {
      if (failing.has(job.id!)) throw new UnrecoverableError("stand-in failure");
      return "done";
    },
    { connection: createRedis("worker"), prefix: getConfig().queuePrefix, concurrency: 8 },
  );
  await worker.waitUntilReady();
});

afterAll(async () => {
  await worker.close();
  await closeQueues();
});

describe("watchJob", () => {
  it("settles true when the job completes, and true when it fails for good", async () => {
    const ok = randomUUID();
    const bad = randomUUID();
    failing.add(bad);
    const watchOk = await watchJob("executions", ok, 5000);
    const watchBad = await watchJob("executions", bad, 5000);
    await enqueue("executions", ok, { invocation_id: ok });
    await enqueue("executions", bad, { invocation_id: bad });
    expect(await watchOk.ended).toBe(true);
    expect(await watchBad.ended).toBe(true);
  });

  it("settles false at its deadline when the job never ends, and at once when cancelled", async () => {
    const never = randomUUID();
    const started = performance.now();
    expect(await (await watchJob("executions", never, 150)).ended).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    const cancelled = await watchJob("executions", randomUUID(), 60_000);
    cancelled.cancel();
    expect(await cancelled.ended).toBe(false);
  });

  it("settles a hundred concurrent waits through one listener per event", async () => {
    const events = await getQueueEvents("executions");
    const before = events.listenerCount("completed");
    const ids = Array.from({ length: 100 }, () => randomUUID());
    const watches = await Promise.all(ids.map((id) => watchJob("executions", id, 10_000)));
    expect(events.listenerCount("completed")).toBe(before);
    await Promise.all(ids.map((id) => enqueue("executions", id, { invocation_id: id })));
    expect(await Promise.all(watches.map((w) => w.ended))).toEqual(ids.map(() => true));
  });

  it("settles every request waiting on the same job", async () => {
    const id = randomUUID();
    const a = await watchJob("executions", id, 5000);
    const b = await watchJob("executions", id, 5000);
    await enqueue("executions", id, { invocation_id: id });
    expect(await Promise.all([a.ended, b.ended])).toEqual([true, true]);
  });
});
