import { type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { logger } from "../shared/log.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import type { QueueName } from "../shared/queue-names.js";
import { createRedis } from "../shared/redis.js";

/**
 * Queues whose job types arrive with a later issue (verification probes, monitoring runs).
 * Nothing enqueues to them yet. Their process runs and shows up in /api/health, and a job that somehow
 * arrives fails loudly instead of being silently dropped or "done".
 */
export function startIdleWorker(queue: QueueName): Worker {
  const config = getConfig();
  const worker = new Worker(
    queue,
    tracedProcessor(queue, async (job: Job): Promise<never> => {
      throw new UnrecoverableError(`queue ${queue} has no job handler yet (job ${job.id})`);
    }),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency[queue],
    },
  );
  worker.on("error", (err) => logger().error({ err, queue }, "worker error"));
  return worker;
}
