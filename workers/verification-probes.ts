import { type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { logger } from "../shared/log.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { abandonOrder, processOrder } from "../shared/verification/index.js";
import { payloadValidator } from "./payload.js";

// The verification-probes worker: a shell around the verification context's order processing
// (shared/verification/orders.ts). A job whose retries are spent (our fault: the probe never finished)
// releases the order's hold in full (docs/verification.md "Money").

const validatePayload = payloadValidator(QUEUES["verification-probes"].payload);

/** Runs one order's probe; exported for tests, which call it without a queue. */
export function processVerificationProbe(payload: QueuePayload<"verification-probes">) {
  return processOrder(payload);
}

/** The attempts a job gets (the registry's job options). */
const ATTEMPTS = QUEUES["verification-probes"].jobOptions.attempts ?? 1;

export function startVerificationProbesWorker(): Worker {
  const config = getConfig();
  const worker = new Worker(
    "verification-probes",
    tracedProcessor("verification-probes", async (job: Job) =>
      processVerificationProbe(validatePayload(job.data) as QueuePayload<"verification-probes">),
    ),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency["verification-probes"],
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  worker.on("failed", (job, err) => {
    logger().warn({ err, job_id: job?.id }, "verification-probes job failed");
    const spent =
      job && (err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? ATTEMPTS));
    const orderId = (job?.data as { order_id?: unknown } | undefined)?.order_id;
    if (spent && typeof orderId === "string") {
      abandonOrder(orderId, `probe_not_completed: ${err.message}`).catch((e) =>
        logger().error({ err: e, order_id: orderId }, "could not release an abandoned verification order"),
      );
    }
  });
  worker.on("error", (err) => logger().error({ err }, "verification-probes worker error"));
  return worker;
}
