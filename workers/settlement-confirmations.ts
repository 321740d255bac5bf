import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import { runPeriodically } from "../shared/infra/periodic.js";
import { logger } from "../shared/log.js";
import {
  confirmDeposit,
  confirmPayout,
  type DepositOutcome,
  type PayoutConfirmationOutcome,
  redriveDeposits,
} from "../shared/money/index.js";
import { tracedProcessor } from "../shared/observability/tracing.js";
import { QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import {
  processX402Settlement,
  redriveX402Settlements,
  type X402SettlementOutcome,
} from "../shared/x402/index.js";
import { payloadValidator } from "./payload.js";

/**
 * One job of the settlement-confirmations queue: a deposit to confirm and credit ({deposit_id}), an
 * x402 payment to submit and confirm on chain ({settlement_id} = x402 payment id, docs/x402.md "x402 gateway"),
 * or a submitted seller payout to confirm and book ({payout_id}, docs/payments.md "Payouts").
 * Safe to run again and twice at once for the same id.
 */
export async function processSettlementConfirmation(
  payload: QueuePayload<"settlement-confirmations">,
): Promise<DepositOutcome | X402SettlementOutcome | PayoutConfirmationOutcome> {
  if (payload.deposit_id) return confirmDeposit(payload.deposit_id);
  if (payload.payout_id) return confirmPayout(payload.payout_id);
  return processX402Settlement(payload.settlement_id!);
}

const validatePayload = payloadValidator(QUEUES["settlement-confirmations"].payload);

/**
 * Starts the settlement-confirmations worker. A check that cannot decide yet (transaction not mined,
 * confirmations short, RPC down, custody frozen) moves the job back to delayed for its retry time
 * without spending one of the job's attempts; the deposit row says what it is waiting for.
 */
export function startSettlementConfirmationsWorker(): Worker {
  const config = getConfig();
  const worker = new Worker(
    "settlement-confirmations",
    tracedProcessor("settlement-confirmations", async (job: Job, token?: string) => {
      const payload = validatePayload(job.data) as QueuePayload<"settlement-confirmations">;
      const outcome = await processSettlementConfirmation(payload);
      if (outcome.status === "waiting") {
        await job.moveToDelayed(Date.now() + outcome.retryInMs, token);
        throw new DelayedError();
      }
      if (outcome.status === "unknown_deposit") {
        throw new UnrecoverableError(`no deposit ${payload.deposit_id} in this database`);
      }
      if (outcome.status === "unknown_payment") {
        throw new UnrecoverableError(`no x402 payment ${payload.settlement_id} in this database`);
      }
      if (outcome.status === "unknown_payout") {
        throw new UnrecoverableError(`no payout ${payload.payout_id} in this database`);
      }
      return outcome.status;
    }),
    {
      connection: createRedis("worker"),
      prefix: config.queuePrefix,
      concurrency: config.queueConcurrency["settlement-confirmations"],
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerStalledIntervalMs,
    },
  );
  worker.on("failed", (job, err) => {
    if (!job) return;
    const final = err instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
    // A deposit whose job gave up stays open (pending/confirming): POST /api/wallet/purchase/verify
    // with the same hash re-drives it.
    logger()[final ? "error" : "warn"]({ err, job_id: job.id, final }, "settlement confirmation job failed");
  });
  worker.on("error", (err) => logger().error({ err }, "settlement-confirmations worker error"));
  // Nothing else drives an x402 payment to the chain, or credits a deposit its payer does not verify
  // again: one whose job the queue failed for good (a worker killed twice while holding it) is re-driven.
  if (config.settlementRecoveryIntervalMs > 0) {
    const sweep = runPeriodically(config.settlementRecoveryIntervalMs, () =>
      Promise.all([redriveX402Settlements(), redriveDeposits()]).then(
        () => {},
        (err) => logger().error({ err }, "settlement recovery sweep failed"),
      ),
    );
    worker.on("closing", () => void sweep.stop());
  }
  return worker;
}
