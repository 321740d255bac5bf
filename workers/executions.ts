import { type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import {
  abandonRunningAttempts,
  finishAttempt,
  finishInvocation,
  insertAttempt,
  listAttempts,
  markRunning,
} from "../shared/db/invocations.js";
import { db } from "../shared/db/knex.js";
import { findListing } from "../shared/db/listings.js";
import { insertReceipt } from "../shared/db/receipts.js";
import { micros } from "../shared/domain/money.js";
import { callProvider, type ProviderResult } from "../shared/domain/provider-call.js";
import { logger } from "../shared/log.js";
import { QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { payloadValidator } from "./payload.js";

/** retry_policy.max_attempts for free listings (spec "Limits"). */
export const MAX_ATTEMPTS = 3;

export type ExecutionOutcome = "succeeded" | "failed" | "already_finished";

type Failure = Extract<ProviderResult, { ok: false }>;

async function fail(invocationId: string, code: string, message: string): Promise<ExecutionOutcome> {
  await finishInvocation(db(), invocationId, { status: "failed", error: { code, message } });
  return "failed";
}

/**
 * Runs one invocation to its end: marks it running, closes attempts a dead worker left open, calls the
 * provider up to MAX_ATTEMPTS times (only when the listing is safe_to_retry), and records the outcome,
 * the attempt and the receipt in one transaction. Safe to run again for the same id at any point.
 */
export async function processExecution(payload: QueuePayload<"executions">): Promise<ExecutionOutcome> {
  const invocation = await markRunning(db(), payload.invocation_id);
  if (!invocation) return "already_finished";
  const listing = await findListing(db(), invocation.listing_id);
  if (!listing) return fail(invocation.id, "LISTING_NOT_FOUND", "the listing no longer exists");

  const abandoned = await abandonRunningAttempts(db(), invocation.id);
  if (abandoned > 0 && !listing.safe_to_retry) {
    return fail(
      invocation.id,
      "PROVIDER_FAILED",
      "a call was in flight when its worker stopped; the provider is not safe to retry, so it is not called again",
    );
  }
  let attemptNo = (await listAttempts(db(), invocation.id)).length;
  let last: Failure | undefined;
  while (attemptNo < MAX_ATTEMPTS) {
    attemptNo += 1;
    const attempt = await insertAttempt(db(), {
      invocation_id: invocation.id,
      attempt_no: attemptNo,
      listing_id: listing.id,
    });
    const result = await callProvider(listing, invocation, attemptNo);
    if (result.ok) {
      await db().transaction(async (trx) => {
        await finishAttempt(trx, attempt.id, {
          status: "succeeded",
          error_code: null,
          error_message: null,
          http_status: result.evidence.http_status,
          latency_ms: result.evidence.latency_ms,
        });
        if (await finishInvocation(trx, invocation.id, { status: "succeeded", output: result.output })) {
          await insertReceipt(trx, {
            invocation_id: invocation.id,
            agent_id: invocation.agent_id,
            listing_id: listing.id,
            amount_micros: micros(invocation.price_micros),
            provider_evidence: { ...result.evidence },
          });
        }
      });
      return "succeeded";
    }
    last = result;
    await finishAttempt(db(), attempt.id, {
      status: "failed",
      error_code: result.code,
      error_message: result.message,
      http_status: result.httpStatus,
      latency_ms: result.latencyMs,
    });
    if (!listing.safe_to_retry) break;
    await new Promise((resolve) => setTimeout(resolve, 100 * attemptNo));
  }
  return fail(
    invocation.id,
    last?.code ?? "PROVIDER_FAILED",
    last?.message ?? `no attempts left (${MAX_ATTEMPTS} made)`,
  );
}

const validatePayload = payloadValidator(QUEUES.executions.payload);

/** Starts the executions worker: payload validation, concurrency from config, error classification. */
export function startExecutionsWorker(): Worker {
  const config = getConfig();
  const worker = new Worker(
    "executions",
    async (job: Job) => {
      const payload = validatePayload(job.data) as QueuePayload<"executions">;
      return processExecution(payload);
    },
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
    if (final && typeof job.data?.invocation_id === "string") {
      fail(job.data.invocation_id, "INTERNAL_ERROR", "the execution could not be completed").catch((e) =>
        logger().error({ err: e, job_id: job.id }, "could not mark invocation failed"),
      );
    }
  });
  worker.on("error", (err) => logger().error({ err }, "executions worker error"));
  return worker;
}
