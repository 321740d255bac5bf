import { randomUUID } from "node:crypto";
import { Job } from "bullmq";
import { listAudit, recordAudit } from "../../audit/index.js";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { formatUsdc } from "../../kernel/money.js";
import { logger } from "../../log.js";
import type { QueueName } from "../../queue-names.js";
import { enqueue, getQueue, type QueuePayload } from "../../queues.js";
import { type EvidenceRow, listEvidence } from "../evidence/store.js";
import { accountFor, retryTransient } from "../ledger/ledger.js";
import { lockAccounts } from "../ledger/store.js";
import { enqueuePayoutJob, payoutView } from "../payouts/payouts.js";
import { findOpenPayout, findPayout, insertPayout, lockPayout, type PayoutRow } from "../payouts/store.js";
import { findOpenLink } from "../wallets/store.js";
import { type DepositConsoleRow, findConsoleDeposit, problemDeposits, problemPayouts } from "./store.js";

// The money console's payouts and deposits (docs/operations.md "Money console"): what failed or stopped
// moving, with its evidence, and the operator's two actions. Both are idempotent and leave an audit row:
//
// - retry a FAILED payout: one new payout of the seller's whole payable balance to the linked wallet,
//   made under the seller's payable-account lock and the failed payout's row lock, and recorded as
//   `payout.retried` on the failed payout. A second retry (or one racing the first) finds that row and
//   answers the same new payout; at most one payout per seller is open (partial unique index), and the
//   new payout's transfer is one per payout id (durable-tx), so nothing is paid twice.
// - re-drive an OPEN (pending or submitted) payout: its job is sent again (job id = payout id).

/**
 * Sends a row's job again, whatever became of the last one: a failed job is retried, a finished one is
 * replaced, a missing one is added; a waiting, delayed or active one is left alone. The job id is the
 * row id, so this never makes two jobs for one row.
 */
export async function redriveJob<Q extends QueueName>(
  queue: Q,
  jobId: string,
  payload: QueuePayload<Q>,
): Promise<"retried" | "re-added" | "added" | "already_queued"> {
  const job = await Job.fromId(getQueue(queue), jobId);
  if (job && (await job.isFailed())) {
    await job.retry("failed");
    return "retried";
  }
  if (job && (await job.isCompleted())) {
    await job.remove();
    await enqueue(queue, jobId, payload);
    return "re-added";
  }
  if (job) return "already_queued";
  await enqueue(queue, jobId, payload);
  return "added";
}

/** An evidence row as the console shows it. */
export function evidenceView(e: EvidenceRow) {
  return {
    state: e.state,
    source: e.source,
    source_ref: e.source_ref,
    amount_micros: e.amount_micros,
    currency: e.currency,
    details: e.details,
    created_at: e.created_at.toISOString(),
  };
}

function depositView(d: DepositConsoleRow) {
  return {
    deposit_id: d.id,
    agent_id: d.agent_id,
    status: d.status,
    chain_id: d.chain_id,
    tx_hash: d.tx_hash,
    amount_usdc: d.amount_micros === null ? null : formatUsdc(BigInt(d.amount_micros)),
    confirmations: d.confirmations,
    confirmations_required: d.confirmations_required,
    waiting_reason: d.waiting_reason,
    rejected_reason: d.rejected_reason,
    created_at: d.created_at.toISOString(),
    updated_at: d.updated_at.toISOString(),
  };
}

/** Failed payouts and open ones untouched for `stuckSeconds`, each with its evidence rows. */
export async function failedOrStuckPayouts(stuckSeconds: number, limit: number) {
  const rows = await problemPayouts(db(), stuckSeconds, limit);
  return Promise.all(
    rows.map(async (p) => ({
      ...payoutView(p),
      seller_id: p.seller_id,
      updated_at: p.updated_at.toISOString(),
      evidence: (await listEvidence(db(), "payout", p.id)).map(evidenceView),
    })),
  );
}

/** Rejected deposits and open ones untouched for `stuckSeconds`, each with its evidence rows. */
export async function failedOrStuckDeposits(stuckSeconds: number, limit: number) {
  const rows = await problemDeposits(db(), stuckSeconds, limit);
  return Promise.all(
    rows.map(async (d) => ({
      ...depositView(d),
      evidence: (await listEvidence(db(), "deposit", d.id)).map(evidenceView),
    })),
  );
}

export type PayoutRetryAction = "retried" | "already_retried" | "in_flight" | "redriven";

/**
 * An operator's retry of a payout (see the top of this file). Answers what was done and the payout
 * that now carries the money. 404 for an unknown payout; 409 for a confirmed one, or a failed one
 * whose seller has no linked wallet or nothing payable.
 */
export async function retryPayout(
  payoutId: string,
  requestId: string,
): Promise<{ action: PayoutRetryAction; payout: ReturnType<typeof payoutView> }> {
  const first = await findPayout(db(), payoutId);
  if (!first) throw new AppError("NOT_FOUND", `no payout ${payoutId}`);
  if (first.status === "confirmed") {
    throw new AppError("CONFLICT", "this payout is confirmed: there is nothing to retry", {
      status: first.status,
    });
  }
  if (first.status !== "failed") {
    const queue = first.status === "pending" ? "payouts" : "settlement-confirmations";
    const job = await redriveJob(queue, first.id, { payout_id: first.id });
    await recordAudit(db(), {
      action: "payout.redriven",
      subjectType: "payout",
      subjectId: first.id,
      requestId,
      data: { status: first.status, queue, job, by: "operator" },
    });
    return { action: "redriven", payout: payoutView(first) };
  }
  const outcome = await retryTransient(() =>
    db().transaction(async (trx) => {
      // The lock order of every payout writer: the seller's payable account, then the payout row.
      const payable = await accountFor(first.seller_id, "seller_payable", "USDC", trx);
      const [account] = await lockAccounts(trx, [payable.id]);
      await lockPayout(trx, first.id);
      const earlier = (await listAudit(trx, "payout", first.id, 50)).find(
        (a) => a.action === "payout.retried",
      );
      if (earlier) {
        const made = await findPayout(trx, String(earlier.data.new_payout_id));
        return { action: "already_retried" as const, payout: made! };
      }
      const open = await findOpenPayout(trx, first.seller_id);
      let action: PayoutRetryAction = "in_flight";
      let payout: PayoutRow | undefined = open;
      if (!payout) {
        const link = await findOpenLink(trx, first.seller_id);
        if (!link) throw new AppError("CONFLICT", "the seller has no linked wallet to pay", {});
        const amount = account!.balance_micros;
        if (amount <= 0n) throw new AppError("CONFLICT", "the seller has nothing payable", {});
        payout = await insertPayout(trx, {
          seller_id: first.seller_id,
          amount_micros: amount,
          chain_id: first.chain_id,
          to_address: link.address,
          batch_id: randomUUID(),
        });
        action = "retried";
        await recordAudit(trx, {
          action: "payout.created",
          subjectType: "payout",
          subjectId: payout.id,
          requestId,
          data: {
            seller_id: first.seller_id,
            amount_micros: amount.toString(),
            to_address: link.address,
            retry_of: first.id,
            by: "operator",
          },
        });
      }
      await recordAudit(trx, {
        action: "payout.retried",
        subjectType: "payout",
        subjectId: first.id,
        requestId,
        data: { new_payout_id: payout.id, reused_open_payout: action === "in_flight", by: "operator" },
      });
      return { action, payout };
    }),
  );
  if (outcome.action === "retried") {
    await enqueuePayoutJob("payouts", outcome.payout.id);
    logger().info(
      { payout_id: outcome.payout.id, retry_of: first.id, request_id: requestId },
      "payout retried",
    );
  }
  return { action: outcome.action, payout: payoutView(outcome.payout) };
}

/** An operator's re-check of an open deposit: its confirmation job is queued again. Audited. */
export async function recheckDeposit(depositId: string, requestId: string) {
  const deposit = await findConsoleDeposit(db(), depositId);
  if (!deposit) throw new AppError("NOT_FOUND", `no deposit ${depositId}`);
  if (deposit.status === "rejected" || deposit.status === "credited") {
    throw new AppError("CONFLICT", `this deposit is ${deposit.status}: final`, { status: deposit.status });
  }
  const job = await redriveJob("settlement-confirmations", deposit.id, { deposit_id: deposit.id });
  await recordAudit(db(), {
    action: "deposit.rechecked",
    subjectType: "deposit",
    subjectId: deposit.id,
    requestId,
    data: { status: deposit.status, job, by: "operator" },
  });
  return { ...depositView(deposit), job };
}
