import { Job } from "bullmq";
import type { Knex } from "knex";
import { db } from "../db/knex.js";
import { logger } from "../log.js";
import { appendEvidence, type NewEvidence } from "../money/index.js";
import { markJobSent } from "../outbox/index.js";
import { enqueue, getQueue, getQueueEvents, redriveJob } from "../queues.js";
import type { EdgeSettlement, InvocationError } from "../routing/index.js";
import {
  findX402Payment,
  findX402PaymentByInvocation,
  insertSettlementJob,
  listStaleSettlingPayments,
  moveX402Payment,
  type X402PaymentRow,
} from "./store/payments.js";

// An x402 payment's life around its call (docs/x402.md "x402 gateway"): the executions worker, in the
// transaction that records a successful call, moves the payment to `settling` and queues its settlement
// job (outbox); in the one that records a failure, it voids it — nothing is ever submitted for work that
// failed. The API waits a bounded time for the settlement job. Evidence rows of a payment have subject
// x402_payment / <payment id>.

const SUBJECT = "x402_payment";

/** One evidence row of a payment (no agent: the buyer is a wallet). */
export function paymentEvidence(
  p: Pick<X402PaymentRow, "id" | "invocation_id">,
  e: Omit<NewEvidence, "agent_id" | "invocation_id" | "subject_type" | "subject_id">,
): NewEvidence {
  return {
    agent_id: null,
    invocation_id: p.invocation_id,
    subject_type: SUBJECT,
    subject_id: p.id,
    currency: "USDC",
    ...e,
  };
}

/**
 * In the executions worker's success transaction: execution evidence, payment → settling and its
 * settlement job in the outbox. Returns the payment id (undefined when the invocation has none).
 */
export async function recordX402Execution(
  trx: Knex.Transaction,
  invocationId: string,
  call: {
    attemptId: string;
    receiptId: string;
    listingId: string;
    providerEvidence: Record<string, unknown>;
  },
): Promise<string | undefined> {
  const payment = await findX402PaymentByInvocation(trx, invocationId);
  if (!payment) return undefined;
  await moveX402Payment(trx, payment.id, ["authorized"], { status: "settling" });
  await appendEvidence(
    trx,
    paymentEvidence(payment, {
      state: "execution",
      source: "provider_response",
      source_ref: call.attemptId,
      details: { listing_id: call.listingId, receipt_id: call.receiptId, ...call.providerEvidence },
    }),
  );
  await insertSettlementJob(trx, payment.id);
  return payment.id;
}

/**
 * In the executions worker's failure transaction: the payment is voided with its outcome evidence.
 * Nothing is submitted, so the buyer pays nothing; the signed authorization expires unused.
 */
export async function recordX402Failure(
  trx: Knex.Transaction,
  invocationId: string,
  error: InvocationError,
): Promise<void> {
  const payment = await findX402PaymentByInvocation(trx, invocationId);
  if (!payment) return;
  await moveX402Payment(trx, payment.id, ["authorized"], { status: "voided", failure_reason: error.code });
  await appendEvidence(
    trx,
    paymentEvidence(payment, {
      state: "outcome",
      source: "invocation",
      source_ref: invocationId,
      amount_micros: 0n,
      details: {
        status: "voided",
        error_code: error.code,
        charged: false,
        note: "the call failed, so nothing is settled: the signed authorization is never submitted and expires",
        authorization_valid_before: payment.valid_before,
      },
    }),
  );
}

/** Time the settlement worker needs after a call to submit the transfer before the authorization lapses. */
export const SETTLEMENT_SUBMIT_MARGIN_MS = 30_000;

/**
 * True when an x402 call must not be made any more: the payment's authorization would lapse before the
 * call (up to callMs) ends and its settlement is submitted, so the seller would work for nothing. A call
 * that waited in the queue (a Redis outage, a backlog) is refused and voided instead.
 */
export async function x402TooLateToCall(invocationId: string, callMs: number): Promise<boolean> {
  const payment = await findX402PaymentByInvocation(db(), invocationId);
  if (!payment) return false;
  return Number(payment.valid_before) * 1000 < Date.now() + callMs + SETTLEMENT_SUBMIT_MARGIN_MS;
}

/** Sends a settlement job after its commit; if Redis fails, the outbox sweeper sends it. */
export async function enqueueX402Settlement(paymentId: string): Promise<void> {
  try {
    await enqueue("settlement-confirmations", paymentId, { settlement_id: paymentId });
    markJobSent("settlement-confirmations", paymentId);
  } catch (err) {
    logger().warn({ err, payment_id: paymentId }, "settlement enqueue failed; the sweeper will send it");
  }
}

/** Payments untouched this long are checked by the recovery sweep. */
const REDRIVE_AFTER_SECONDS = 30;
const REDRIVE_BATCH = 100;

/**
 * The settlement-confirmations recovery sweep's x402 part: a payment still settling or submitted whose
 * settlement job the queue failed for good (its worker killed twice while holding it) or lost is driven
 * again — otherwise it never settles and the seller is never paid for work done. Returns how many.
 */
export async function redriveX402Settlements(olderThanSeconds = REDRIVE_AFTER_SECONDS): Promise<number> {
  let redriven = 0;
  for (const id of await listStaleSettlingPayments(db(), olderThanSeconds, REDRIVE_BATCH)) {
    if (await redriveJob("settlement-confirmations", id, { settlement_id: id })) {
      redriven += 1;
      logger().warn({ payment_id: id }, "x402 settlement job re-driven");
    }
  }
  return redriven;
}

/** Waits (bounded) for a payment's settlement job, then reads the payment as it stands. */
export async function awaitX402Settlement(paymentId: string, waitMs: number): Promise<X402PaymentRow> {
  if (waitMs > 0) {
    try {
      const job = await Job.fromId(getQueue("settlement-confirmations"), paymentId);
      if (job) await job.waitUntilFinished(await getQueueEvents("settlement-confirmations"), waitMs);
    } catch {
      // Timed out, delayed for confirmations, or failed: the row says what has evidence.
    }
  }
  return (await findX402Payment(db(), paymentId))!;
}

/**
 * The x402 edge's part in running an invocation (routing's EdgeSettlement): the executions worker passes
 * it to runInvocation, since routing sits below x402 and cannot import it.
 */
export const x402EdgeSettlement: EdgeSettlement = {
  tooLateToCall: x402TooLateToCall,
  recordServed: recordX402Execution,
  settleAfterCommit: enqueueX402Settlement,
  recordFailed: recordX402Failure,
};
