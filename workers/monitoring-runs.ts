import { type Job, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { closeQueues, QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { processMonitoringRun } from "../shared/verification/index.js";
import { payloadValidator } from "./payload.js";

// The monitoring-runs worker: a shell around the verification context's monitoring runs
// (shared/verification/monitoring.ts). Jobs come from one BullMQ job scheduler per subscription, which
// exists only when VERIFICATION_MONITORING_SCHEDULER is on. The job id is the run key: a redelivered job
// finds its run and charges nothing more.

const validatePayload = payloadValidator(QUEUES["monitoring-runs"].payload);

export function startMonitoringRunsWorker(): Worker {
  const config = getConfig();
  // A run enqueues its order's probe: close that producer too.
  onShutdown("queues", "clients", closeQueues);
  const worker = new Worker(
    "monitoring-runs",
    tracedProcessor("monitoring-runs", async (job: Job) =>
      processMonitoringRun(validatePayload(job.data) as QueuePayload<"monitoring-runs">, String(job.id)),
    ),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency["monitoring-runs"],
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  worker.on("failed", (job, err) => logger().warn({ err, job_id: job?.id }, "monitoring-runs job failed"));
  worker.on("error", (err) => logger().error({ err }, "monitoring-runs worker error"));
  return worker;
}
