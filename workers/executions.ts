import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq";
import { getConfig } from "../shared/config.js";
import {
  abandonExpiredAttempts,
  type CallTarget,
  claimRun,
  finishAttempt,
  finishInvocation,
  insertAttempt,
  recordSuccess,
} from "../shared/db/invocations.js";
import { db } from "../shared/db/knex.js";
import { isUuid } from "../shared/domain/ids.js";
import {
  callProvider,
  MAX_PROVIDER_LATENCY_MS,
  type ProviderResult,
} from "../shared/domain/provider-call.js";
import { logger } from "../shared/log.js";
import { QUEUES, type QueuePayload } from "../shared/queues.js";
import { createRedis } from "../shared/redis.js";
import { payloadValidator } from "./payload.js";

/** retry_policy.max_attempts for free listings (spec "Limits"). */
export const MAX_ATTEMPTS = 3;

/** Time after a call's own timeout for its worker to record the result before the attempt expires. */
export const ATTEMPT_MARGIN_MS = 2000;

export type ExecutionOutcome = "succeeded" | "failed" | "already_finished";

/**
 * Another run of the same invocation has a call in flight (BullMQ delivers at least once). This run must
 * not call the provider; it retries once the live attempt's deadline has passed.
 */
export class RunInProgress extends Error {
  constructor(readonly retryAt: Date) {
    super("another run of this invocation has a call in flight");
  }
}

type Failure = Extract<ProviderResult, { ok: false }>;

async function fail(invocationId: string, code: string, message: string): Promise<ExecutionOutcome> {
  const finished = await finishInvocation(db(), invocationId, { status: "failed", error: { code, message } });
  return finished ? "failed" : "already_finished";
}

function callTimeoutMs(listing: CallTarget): number {
  return Math.min(listing.max_latency_ms, MAX_PROVIDER_LATENCY_MS);
}

/** Inserts the next attempt, or throws RunInProgress when a concurrent run took that number first. */
async function startAttempt(invocationId: string, attemptNo: number, listing: CallTarget) {
  try {
    return await insertAttempt(
      db(),
      { invocation_id: invocationId, attempt_no: attemptNo, listing_id: listing.id },
      callTimeoutMs(listing) + ATTEMPT_MARGIN_MS,
    );
  } catch (error) {
    if ((error as { code?: string }).code === "23505") {
      throw new RunInProgress(new Date(Date.now() + callTimeoutMs(listing) + ATTEMPT_MARGIN_MS));
    }
    throw error;
  }
}

/**
 * Runs one invocation to its end: marks it running, waits out any attempt another run still has in
 * flight, closes attempts of dead workers as abandoned, calls the provider (up to MAX_ATTEMPTS calls
 * in all, and never a second one when the listing is not safe_to_retry), and records the attempt, the
 * outcome and the receipt in one transaction. Safe to run again, or twice at once, for the same id.
 */
export async function processExecution(payload: QueuePayload<"executions">): Promise<ExecutionOutcome> {
  const claim = await claimRun(db(), payload.invocation_id, {
    maxCallMs: MAX_PROVIDER_LATENCY_MS,
    marginMs: ATTEMPT_MARGIN_MS,
  });
  if (!claim) return "already_finished";
  const { invocation, listing, attempts, firstAttempt } = claim;
  if (!listing) return fail(invocation.id, "LISTING_NOT_FOUND", "the listing no longer exists");
  // No attempt existed, yet another run recorded attempt 1 in the same instant: its call is in flight.
  if (attempts.length === 0 && !firstAttempt) {
    throw new RunInProgress(new Date(Date.now() + callTimeoutMs(listing) + ATTEMPT_MARGIN_MS));
  }

  const live = attempts.find((a) => a.live);
  if (live) throw new RunInProgress(live.deadline_at ?? new Date(Date.now() + ATTEMPT_MARGIN_MS));
  if (attempts.some((a) => a.status === "running")) await abandonExpiredAttempts(db(), invocation.id);
  let attemptNo = attempts.length;
  if (attemptNo > 0 && !listing.safe_to_retry) {
    return fail(
      invocation.id,
      "PROVIDER_FAILED",
      "a call was already made for this invocation and the provider is not safe to retry, so it is not called again",
    );
  }

  let last: Failure | undefined;
  while (attemptNo < MAX_ATTEMPTS) {
    attemptNo += 1;
    const attempt =
      attemptNo === 1 && firstAttempt ? firstAttempt : await startAttempt(invocation.id, attemptNo, listing);
    const result = await callProvider(listing, invocation, attemptNo);
    if (result.ok) {
      const receiptId = await recordSuccess(db(), {
        attemptId: attempt.id,
        invocationId: invocation.id,
        output: result.output,
        httpStatus: result.evidence.http_status,
        latencyMs: result.evidence.latency_ms,
        evidence: { ...result.evidence },
      });
      return receiptId ? "succeeded" : "already_finished";
    }
    last = result;
    const recorded = await finishAttempt(db(), attempt.id, {
      status: "failed",
      error_code: result.code,
      error_message: result.message,
      http_status: result.httpStatus,
      latency_ms: result.latencyMs,
    });
    if (!recorded || !listing.safe_to_retry) break;
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
    async (job: Job, token?: string) => {
      const payload = validatePayload(job.data) as QueuePayload<"executions">;
      try {
        return await processExecution(payload);
      } catch (error) {
        if (!(error instanceof RunInProgress)) throw error;
        // Wait for the live attempt's deadline without spending one of the job's retries.
        await job.moveToDelayed(error.retryAt.getTime() + 100, token);
        throw new DelayedError();
      }
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
    const invocationId = job.data?.invocation_id;
    if (final && typeof invocationId === "string" && isUuid(invocationId)) {
      fail(invocationId, "INTERNAL_ERROR", "the execution could not be completed").catch((e) =>
        logger().error({ err: e, job_id: job.id }, "could not mark invocation failed"),
      );
    }
  });
  worker.on("error", (err) => logger().error({ err }, "executions worker error"));
  return worker;
}
