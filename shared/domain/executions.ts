import { randomUUID } from "node:crypto";
import type { Job } from "bullmq";
import { getConfig } from "../config.js";
import { claimIdempotencyKey, type IdempotencyRow } from "../db/idempotency.js";
import {
  findInvocation,
  findInvocationSummary,
  type InvocationRow,
  type InvocationSummary,
  insertInvocationWithJob,
  type NewInvocation,
} from "../db/invocations.js";
import { db } from "../db/knex.js";
import { findActiveByTaskAlias, type ListingRow } from "../db/listings.js";
import { AppError, paidExecutionUnavailable } from "../errors.js";
import { logger } from "../log.js";
import { enqueue, getQueueEvents } from "../queues.js";
import type { Principal } from "./auth.js";
import { paidGate } from "./availability.js";
import { fingerprint, resolveReplay } from "./idempotency.js";
import { validateListingInput } from "./json-schema.js";
import { formatUsdc, micros, parseUsdc } from "./money.js";
import { markJobSent } from "./outbox.js";

export interface ExecuteRequest {
  task: string;
  input: Record<string, unknown>;
  maxCostUsdc?: number;
  idempotencyKey?: string;
}

export type Submission =
  | { replayed: false; invocation: InvocationRow; job: Job | undefined }
  | { replayed: true; invocation: InvocationRow };

class KeyAlreadyClaimed extends Error {
  constructor(readonly existing: IdempotencyRow) {
    super("idempotency key already claimed");
  }
}

function chooseListing(candidates: ListingRow[], task: string, maxCostMicros: bigint | null): ListingRow {
  if (candidates.length === 0) {
    throw new AppError("LISTING_NOT_FOUND", `no active listing answers to task "${task}"`, {
      task,
      hint: "call GET /api/execute/match or use task 'echo' for the free check",
    });
  }
  const affordable = candidates.filter(
    (l) => maxCostMicros === null || micros(l.price_micros) <= maxCostMicros,
  );
  if (affordable.length === 0) {
    throw new AppError("LISTING_NOT_FOUND", `no listing for task "${task}" is within max_cost`, {
      task,
      max_cost_usdc: formatUsdc(maxCostMicros ?? 0n),
      cheapest_usdc: formatUsdc(
        micros(candidates.map((l) => l.price_micros).sort((a, b) => Number(BigInt(a) - BigInt(b)))[0]!),
      ),
    });
  }
  const chosen = affordable[0]!;
  // The gate is read afresh: paid work is refused before any effect while it is closed.
  const gate = paidGate();
  if (micros(chosen.price_micros) > 0n && !gate.enabled) {
    throw paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
  }
  return chosen;
}

/**
 * Accepts an execute request: picks the listing for the task, validates the input against its schema,
 * then commits the invocation, the idempotency claim and the outbox row in one transaction and
 * enqueues after commit. A key seen before replays (or 409/422) instead of creating anything.
 */
export async function submitExecution(
  principal: Principal,
  req: ExecuteRequest,
  requestId: string,
): Promise<Submission> {
  const config = getConfig();
  const maxCostMicros =
    req.maxCostUsdc === undefined ? null : parseUsdc(req.maxCostUsdc, "/constraints/max_cost");
  const listing = chooseListing(await findActiveByTaskAlias(db(), req.task), req.task, maxCostMicros);
  validateListingInput(listing, req.input);

  const invocationId = randomUUID();
  const print = fingerprint("POST /api/execute", {
    task: req.task,
    input: req.input,
    max_cost: req.maxCostUsdc ?? null,
  });
  let invocation: InvocationRow;
  try {
    const row: NewInvocation = {
      id: invocationId,
      agent_id: principal.agentId,
      api_key_id: principal.apiKeyId,
      listing_id: listing.id,
      task: req.task,
      route: "execute",
      input: req.input,
      max_cost_micros: maxCostMicros,
      price_micros: micros(listing.price_micros),
    };
    const key = req.idempotencyKey;
    invocation = key
      ? await db().transaction(async (trx) => {
          const inserted = await insertInvocationWithJob(trx, row, "executions");
          // After the invocation row (the key references it); an already-claimed key rolls it back.
          const claim = await claimIdempotencyKey(
            trx,
            { agent_id: principal.agentId, key, fingerprint: print, invocation_id: invocationId },
            config.idempotencyRetentionHours,
          );
          if (!claim.claimed) throw new KeyAlreadyClaimed(claim.existing);
          return inserted;
        })
      : await insertInvocationWithJob(db(), row, "executions");
  } catch (error) {
    if (!(error instanceof KeyAlreadyClaimed)) throw error;
    const original = await findInvocation(db(), error.existing.invocation_id);
    return { replayed: true, invocation: resolveReplay(error.existing, print, original!) };
  }

  let job: Job | undefined;
  try {
    job = await enqueue("executions", invocationId, { invocation_id: invocationId });
    markJobSent("executions", invocationId);
  } catch (err) {
    logger().warn(
      { err, request_id: requestId, invocation_id: invocationId },
      "enqueue failed; the sweeper will send it",
    );
  }
  return { replayed: false, invocation, job };
}

/** Waits up to waitMs for the job, then reads the invocation's state from PostgreSQL (the authority). */
export async function awaitInvocation(submission: Submission, waitMs: number): Promise<InvocationSummary> {
  if (!submission.replayed && submission.job && waitMs > 0) {
    try {
      await submission.job.waitUntilFinished(await getQueueEvents("executions"), waitMs);
    } catch {
      // Timed out or failed in the queue: the row below says which, and 202 covers the rest.
    }
  }
  return (await findInvocationSummary(db(), submission.invocation.id))!;
}
