import type { Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { closeDb } from "../shared/db/knex.js";
import { onShutdown, type ShutdownPhase } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { closeSafeFetch } from "../shared/net/safe-fetch.js";
import { observeJobs } from "../shared/observability/metrics.js";
import { startMetricsServer } from "../shared/observability/metrics-server.js";
import type { QueueName } from "../shared/queue-names.js";
import { closeCommandRedis } from "../shared/redis.js";
import { WORKERS } from "./registry.js";

/**
 * Starts the named queues' workers; on shutdown each finishes its active jobs (worker.close()), in the
 * ingress phase, or in `hosted work` where this process also serves the first-party tools they call.
 */
export async function startWorkers(
  queues: readonly QueueName[],
  closePhase: ShutdownPhase = "ingress",
): Promise<Worker[]> {
  onShutdown("database", "database", closeDb);
  onShutdown("outbound http", "clients", closeSafeFetch);
  onShutdown("command redis", "clients", closeCommandRedis);
  const workers = queues.map((queue) => WORKERS[queue]());
  for (const worker of workers) observeJobs(worker as never);
  const metricsPort = getConfig().workerMetricsPort;
  if (metricsPort > 0) {
    const server = await startMetricsServer(metricsPort);
    onShutdown(
      "metrics server",
      "clients",
      () => new Promise<void>((resolve) => server.close(() => resolve())),
    );
    logger().info({ port: metricsPort }, "worker metrics listening");
  }
  for (const worker of workers) onShutdown(`worker ${worker.name}`, closePhase, () => worker.close());
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  logger().info({ queues }, "workers started");
  return workers;
}
