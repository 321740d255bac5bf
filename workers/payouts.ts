import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { type PayoutSubmissionOutcome, processPayout, processPayoutSweep } from "../shared/money/index.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { closeQueues, getQueue, QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { payloadValidator } from "./payload.js";

/** The one BullMQ job scheduler of this queue: every PAYOUT_SWEEP_INTERVAL_MS it adds a batch job. */
export const PAYOUT_SWEEP_SCHEDULER_ID = "payout-sweep";

/**
 * One job of the payouts queue: a batch ({sweep: true}) that creates a payout per seller due one, or
 * one payout to submit on chain ({payout_id}). Safe to run again and twice at once.
 */
export async function processPayoutJob(
  payload: QueuePayload<"payouts">,
): Promise<PayoutSubmissionOutcome | { status: "swept"; created: number }> {
  if (payload.sweep) return { status: "swept", created: await processPayoutSweep() };
  return processPayout(payload.payout_id!);
}

/**
 * Upserts the payout-sweep job scheduler (idempotent: every payouts worker calls it at start), or
 * removes it when PAYOUT_SWEEP_INTERVAL_MS is 0.
 */
export async function schedulePayoutSweep(): Promise<"scheduled" | "disabled"> {
  const { payoutSweepIntervalMs } = getConfig();
  const queue = getQueue("payouts");
  if (payoutSweepIntervalMs === 0) {
    await queue.removeJobScheduler(PAYOUT_SWEEP_SCHEDULER_ID);
    return "disabled";
  }
  await queue.upsertJobScheduler(
    PAYOUT_SWEEP_SCHEDULER_ID,
    { every: payoutSweepIntervalMs },
    {
      name: "sweep",
      data: { sweep: true },
      opts: { attempts: 3, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
    },
  );
  return "scheduled";
}

const validatePayload = payloadValidator(QUEUES.payouts.payload);

/**
 * Starts the payouts worker and upserts the payout-sweep scheduler. A payout that cannot be submitted
 * yet (gate closed, RPC down, hot wallet short) moves back to delayed without spending an attempt; the
 * payout row's waiting_reason says why.
 */
export function startPayoutsWorker(): Worker {
  const config = getConfig();
  // This worker also produces jobs (payout and confirmation jobs): close that producer too.
  onShutdown("queues", "clients", closeQueues);
  const worker = new Worker(
    "payouts",
    tracedProcessor("payouts", async (job: Job, token?: string) => {
      const payload = validatePayload(job.data) as QueuePayload<"payouts">;
      const outcome = await processPayoutJob(payload);
      if (outcome.status === "waiting") {
        await job.moveToDelayed(Date.now() + outcome.retryInMs, token);
        throw new DelayedError();
      }
      if (outcome.status === "unknown_payout") {
        throw new UnrecoverableError(`no payout ${payload.payout_id} in this database`);
      }
      return outcome;
    }),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency.payouts,
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  worker.on("failed", (job, err) => {
    if (!job) return;
    const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
    // A payout whose job gave up stays pending: the next sweep re-drives it.
    logger()[final ? "error" : "warn"]({ err, job_id: job.id, final }, "payouts job failed");
  });
  worker.on("error", (err) => logger().error({ err }, "payouts worker error"));
  schedulePayoutSweep().catch((err) => logger().error({ err }, "could not schedule the payout sweep"));
  return worker;
}
