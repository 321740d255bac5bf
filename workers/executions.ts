import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { isUuid } from "../shared/kernel/ids.js";
import { onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import {
  ABANDONED_BY_QUEUE,
  failInvocation,
  RunInProgress,
  type Runner,
  runExecutionsHere,
  runInvocation,
  scheduleOrphanRecovery,
} from "../shared/routing/index.js";
import { x402EdgeSettlement } from "../shared/x402/index.js";
import { payloadValidator } from "./payload.js";

// The executions worker: a shell around routing's runInvocation (shared/routing/run-invocation.ts).

/** One job: runs its invocation with the x402 edge's settlement composed in. */
export function processExecution(payload: QueuePayload<"executions">) {
  return runInvocation(payload, x402EdgeSettlement);
}

/** The same run in the request that submitted it, from the claim its insert made (runs-here.ts). */
export const runExecutionHere: Runner = (invocationId, claim, early) =>
  runInvocation({ invocation_id: invocationId }, x402EdgeSettlement, claim, early);

/**
 * Lets the API of this process run executions in the requests that submit them (runs-here.ts), as many
 * at once as the worker's concurrency, when EXECUTE_IN_PROCESS allows and the recovery sweep is on;
 * drained at shutdown with the worker. Only a process that hosts both (npm start) calls it.
 */
export function runExecutionsInThisProcess(): void {
  const config = getConfig();
  // A run here has no outbox row: the recovery sweep is what finishes it if this process dies.
  if (!config.executeInProcess || config.executionsRecoveryIntervalMs === 0) return;
  const here = runExecutionsHere(runExecutionHere, config.queueConcurrency.executions);
  // Before the HTTP server closes: a run reaches first-party tools through it.
  onShutdown("executions run here", "hosted work", here.drain);
}

const validatePayload = payloadValidator(QUEUES.executions.payload);

/** Starts the executions worker: payload validation, concurrency from config, error classification. */
export function startExecutionsWorker(): Worker {
  const config = getConfig();
  const worker = new Worker(
    "executions",
    tracedProcessor("executions", async (job: Job, token?: string) => {
      const payload = validatePayload(job.data) as QueuePayload<"executions">;
      try {
        return await processExecution(payload);
      } catch (error) {
        if (!(error instanceof RunInProgress)) throw error;
        // Wait for the live attempt's deadline without spending one of the job's retries.
        await job.moveToDelayed(error.retryAt.getTime() + 100, token);
        throw new DelayedError();
      }
    }),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency.executions,
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  // A job the queue gives up on (infrastructure kept failing) must not leave its invocation running.
  worker.on("failed", (job, err) => {
    if (!job) return;
    const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
    logger().warn({ err, job_id: job.id, final }, "execution job failed");
    const invocationId = job.data?.invocation_id;
    if (final && typeof invocationId === "string" && isUuid(invocationId)) {
      failInvocation(invocationId, ABANDONED_BY_QUEUE, x402EdgeSettlement).catch((e) =>
        logger().error({ err: e, job_id: job.id }, "could not mark invocation failed"),
      );
    }
  });
  worker.on("error", (err) => logger().error({ err }, "executions worker error"));
  // The handler above runs after the job is failed in Redis: a process killed in between leaves the
  // invocation open, and this sweep ends it (shared/routing/recovery.ts).
  if (config.executionsRecoveryIntervalMs > 0) {
    const sweep = scheduleOrphanRecovery(x402EdgeSettlement, config.executionsRecoveryIntervalMs);
    worker.on("closing", () => void sweep.stop());
  }
  return worker;
}
