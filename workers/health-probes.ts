import { type Job, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { closeQueues, QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { processHealthProbe, processProbeSweep, scheduleProbeSweep } from "../shared/routing/index.js";
import { payloadValidator } from "./payload.js";

// The health-probes worker: a shell around routing's probe sweep (shared/routing/probe-sweep.ts).

const validatePayload = payloadValidator(QUEUES["health-probes"].payload);

/** Starts the health-probes worker (probes and sweeps) and upserts the probe-sweep scheduler. */
export function startHealthProbesWorker(): Worker {
  const config = getConfig();
  // This worker also produces jobs (the sweep): close that producer too.
  onShutdown("queues", "clients", closeQueues);
  const worker = new Worker(
    "health-probes",
    tracedProcessor("health-probes", async (job: Job) => {
      const payload = validatePayload(job.data) as QueuePayload<"health-probes">;
      if (payload.sweep) return { enqueued: await processProbeSweep(job.timestamp) };
      return processHealthProbe({ listing_id: payload.listing_id! });
    }),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency["health-probes"],
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  worker.on("failed", (job, err) => logger().warn({ err, job_id: job?.id }, "health-probes job failed"));
  worker.on("error", (err) => logger().error({ err }, "health-probes worker error"));
  scheduleProbeSweep().catch((err) => logger().error({ err }, "could not schedule the probe sweep"));
  return worker;
}
