import { findListing } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, ERRORS, type ErrorCode } from "../errors.js";
import { isUuid } from "../kernel/ids.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { type EvidenceRow, listEvidence } from "../money/index.js";
import { approvalSummary } from "./approvals/approvals.js";
import { amountSuffix, capturedSplit, paymentView } from "./paid-invocations.js";
import { type candidateView, WEIGHTS } from "./router.js";
import { findApprovalForInvocation } from "./store/approvals.js";
import {
  type AttemptRow,
  findInvocation,
  findOwnedInvocation,
  type InvocationRow,
  type InvocationSummary,
  listAttempts,
  TERMINAL,
} from "./store/invocations.js";
import { findOwnedReceipt, findReceiptForInvocation } from "./store/receipts.js";

function links(invocationId: string, receiptId: string | null) {
  const base = getConfig().publicBaseUrl;
  return {
    status_url: `${base}/api/execute/status/${invocationId}`,
    receipt_url: receiptId ? `${base}/api/commerce/receipts/${receiptId}` : null,
  };
}

/** Sandbox (tumbler) invocations are paid in simulated tUSDC and say so wherever an amount appears. */
function sandboxFlag(invocation: Pick<InvocationRow, "currency">): { simulated?: true } {
  return invocation.currency === "tUSDC" ? { simulated: true } : {};
}

/**
 * What was charged comes from the receipt (evidence); without one nothing was. Amounts are named in the
 * invocation's unit (amount_usdc, or amount_tusdc for the sandbox).
 */
function cost(invocation: InvocationRow, receiptAmountMicros: string | null | undefined) {
  const charged = receiptAmountMicros ? micros(receiptAmountMicros) : 0n;
  const unit = amountSuffix(invocation.currency);
  return {
    [`amount_${unit}`]: formatUsdc(charged),
    [`listed_price_${unit}`]: formatUsdc(micros(invocation.price_micros)),
    currency: invocation.currency,
    charged: charged > 0n,
    ...sandboxFlag(invocation),
  };
}

/**
 * Settlement is its own evidence state (DESIGN §4): free work has none; a paid router call settles in the
 * ledger (capture or release of its hold), each with an evidence row; nothing is reported without one.
 */
function settlement(invocation: InvocationRow, evidence: EvidenceRow[]) {
  if (micros(invocation.hold_micros) === 0n)
    return { state: null, null_reason: "free_listing_no_settlement" };
  const capture = evidence.find((e) => e.state === "capture");
  const refund = evidence.find((e) => e.state === "refund");
  const row = capture ?? refund;
  if (!row) return { state: null, null_reason: "hold_not_resolved_yet" };
  return {
    state: capture ? ("captured" as const) : ("released" as const),
    rail: invocation.currency === "tUSDC" ? "tumbler_ledger" : "ledger",
    ledger_transaction_id: row.source_ref,
    at: row.created_at.toISOString(),
    null_reason: null,
    ...sandboxFlag(invocation),
  };
}

function attemptView(a: AttemptRow) {
  return {
    attempt_no: a.attempt_no,
    listing_id: a.listing_id,
    status: a.status,
    error_code: a.error_code,
    error_message: a.error_message,
    http_status: a.http_status,
    latency_ms: a.latency_ms,
    started_at: a.started_at.toISOString(),
    finished_at: a.finished_at?.toISOString() ?? null,
  };
}

/** True once the run has ended (succeeded or failed): its answer is the result, not a status to poll. */
export function isTerminal(invocation: Pick<InvocationSummary, "status">): boolean {
  return TERMINAL.includes(invocation.status);
}

/**
 * The execute answer for an ended invocation: the result on success; on failure the invocation's
 * error as an AppError (rendered in the envelope, with the invocation id to poll).
 */
export function executeResult(invocation: InvocationSummary) {
  if (invocation.status === "failed") {
    const code = (invocation.error?.code ?? "PROVIDER_FAILED") as ErrorCode;
    throw new AppError(
      code in ERRORS ? code : "PROVIDER_FAILED",
      invocation.error?.message ?? "the invocation failed",
      {
        invocation_id: invocation.id,
        ...(invocation.error?.retry_after_seconds
          ? { retry_after_seconds: invocation.error.retry_after_seconds }
          : {}),
        ...links(invocation.id, null),
      },
    );
  }
  return {
    success: true as const,
    output: invocation.output,
    invocation_id: invocation.id,
    status: invocation.status,
    receipt_id: invocation.receipt_id,
    provider: {
      listing_id: invocation.served_listing_id ?? invocation.listing_id,
      name: invocation.listing_name,
      slug: invocation.listing_slug,
      selection_reason: selectionReason(invocation),
    },
    ...servedBy(invocation),
    selection: invocation.selection,
    cost: cost(invocation, invocation.receipt_amount_micros),
    ...sandboxFlag(invocation),
    metering: {
      attempts: invocation.attempt_count,
      provider_latency_ms: invocation.served_latency_ms,
      total_ms: invocation.completed_at
        ? invocation.completed_at.getTime() - invocation.created_at.getTime()
        : null,
    },
    ...links(invocation.id, invocation.receipt_id),
  };
}

/** Why the serving provider was the one: the router's first choice, a fallback, or a locked route. */
function selectionReason(invocation: InvocationRow): string {
  if (invocation.route === "invoke") return "direct_invoke_locked_to_listing";
  if (invocation.route === "tumbler") return "sandbox_quote_locked_to_listing";
  if (invocation.route === "x402") return "x402_quote_locked_to_listing";
  const served = invocation.served_listing_id ?? invocation.listing_id;
  return served === invocation.listing_id
    ? "top_ranked_candidate"
    : "fallback_after_higher_ranked_candidate_failed";
}

/** A candidate as execute recorded it in invocations.selection (router.ts candidateView). */
type RankedCandidate = Pick<
  ReturnType<typeof candidateView>,
  "listing_id" | "rank" | "score" | "score_components"
>;

/**
 * The served listing's place in the router's ranking, as recorded when the invocation was accepted
 * (invocations.selection): its rank, score and score components. Locked routes (invoke, x402, sandbox)
 * rank nothing, so they have none and say why.
 */
function selectionBasis(invocation: InvocationRow, served: string | null) {
  if (invocation.route !== "execute")
    return { selection_basis: null, selection_basis_null_reason: "locked_to_listing" };
  if (!served) return { selection_basis: null, selection_basis_null_reason: "no_listing_served" };
  const candidates = (invocation.selection?.candidates ?? []) as RankedCandidate[];
  const entry = candidates.find((c) => c.listing_id === served);
  if (!entry) return { selection_basis: null, selection_basis_null_reason: "ranking_not_recorded" };
  return {
    selection_basis: {
      rank: entry.rank,
      score: entry.score,
      score_components: entry.score_components,
      weights: WEIGHTS,
      passed_over: candidates.filter((c) => c.rank < entry.rank).map((c) => c.listing_id),
    },
    selection_basis_null_reason: null,
  };
}

/**
 * Who served and why, for status and receipt: the serving listing (null until one succeeded), the
 * selection reason and the served listing's ranking.
 */
function servedBy(invocation: InvocationRow) {
  const served =
    invocation.status === "succeeded" ? (invocation.served_listing_id ?? invocation.listing_id) : null;
  return {
    served_listing_id: served,
    served_listing_id_null_reason: served
      ? null
      : invocation.status === "failed"
        ? "no_candidate_succeeded"
        : "invocation_not_finished",
    selection_reason: served ? selectionReason(invocation) : null,
    ...selectionBasis(invocation, served),
  };
}

/** The 202 body for work that is still queued or running. */
export function pendingResult(invocation: InvocationRow) {
  return {
    success: false as const,
    status: invocation.status as "queued" | "running",
    invocation_id: invocation.id,
    message: "accepted; poll status_url for the outcome",
    status_url: links(invocation.id, null).status_url,
  };
}

/** GET /api/execute/status/{id}: the owner's view of an invocation, every attempt included. */
export async function invocationStatus(agentId: string, invocationId: string) {
  const invocation = isUuid(invocationId)
    ? await findOwnedInvocation(db(), invocationId, agentId)
    : undefined;
  if (!invocation)
    throw new AppError("NOT_FOUND", "no invocation with this id for this agent", {
      invocation_id: invocationId,
    });
  const [attempts, receipt, evidence, approval] = await Promise.all([
    listAttempts(db(), invocation.id),
    findReceiptForInvocation(db(), invocation.id),
    listEvidence(db(), "invocation", invocation.id),
    findApprovalForInvocation(db(), invocation.id),
  ]);
  return {
    invocation_id: invocation.id,
    status: invocation.status,
    approval: approval ? approvalSummary(approval) : null,
    task: invocation.task,
    route: invocation.route,
    listing_id: invocation.served_listing_id ?? invocation.listing_id,
    first_choice_listing_id: invocation.listing_id,
    ...servedBy(invocation),
    created_at: invocation.created_at.toISOString(),
    started_at: invocation.started_at?.toISOString() ?? null,
    completed_at: invocation.completed_at?.toISOString() ?? null,
    output: invocation.status === "succeeded" ? invocation.output : null,
    error: invocation.error,
    attempts: attempts.map(attemptView),
    receipt_id: receipt?.id ?? null,
    receipt_null_reason: receipt
      ? null
      : invocation.status === "failed"
        ? "invocation_failed_nothing_charged"
        : invocation.status === "succeeded"
          ? "receipt_not_recorded"
          : "invocation_not_finished",
    cost: cost(invocation, receipt?.amount_micros),
    ...sandboxFlag(invocation),
    payment: paymentView(
      micros(invocation.hold_micros),
      micros(invocation.price_micros),
      evidence,
      invocation.currency,
    ),
    settlement: settlement(invocation, evidence),
    ...links(invocation.id, receipt?.id ?? null),
  };
}

/** GET /api/commerce/receipts/{id}: the owner's normalized receipt with its provider evidence. */
export async function receiptView(agentId: string, receiptId: string) {
  const receipt = isUuid(receiptId) ? await findOwnedReceipt(db(), receiptId, agentId) : undefined;
  if (!receipt)
    throw new AppError("NOT_FOUND", "no receipt with this id for this agent", { receipt_id: receiptId });
  const [listing, invocation, evidence, attempts] = await Promise.all([
    findListing(db(), receipt.listing_id),
    findInvocation(db(), receipt.invocation_id),
    listEvidence(db(), "invocation", receipt.invocation_id),
    listAttempts(db(), receipt.invocation_id),
  ]);
  const hold = invocation ? micros(invocation.hold_micros) : 0n;
  const currency = receipt.currency === "tUSDC" ? "tUSDC" : "USDC";
  const unit = amountSuffix(currency);
  const payment = paymentView(hold, micros(receipt.amount_micros), evidence, currency);
  const split = hold > 0n ? capturedSplit(evidence) : null;
  return {
    receipt_id: receipt.id,
    schema: `${getConfig().platformId}.receipt.v1`,
    invocation_id: receipt.invocation_id,
    agent_id: receipt.agent_id,
    listing_id: receipt.listing_id,
    provider_name: listing?.name ?? null,
    ...(invocation ? servedBy(invocation) : {}),
    attempts: attempts.map(attemptView),
    outcome: "succeeded" as const,
    [`amount_${unit}`]: formatUsdc(micros(receipt.amount_micros)),
    currency,
    ...sandboxFlag({ currency }),
    split: split
      ? {
          [`seller_share_${unit}`]: formatUsdc(split.sellerMicros),
          [`platform_fee_${unit}`]: formatUsdc(split.feeMicros),
          platform_fee_rate: 0.03,
          rule: `fee = floor(amount × 3 / 100) in micro-${currency}; the seller gets the rest`,
        }
      : null,
    split_null_reason: split ? null : "nothing_captured",
    provider_evidence: receipt.provider_evidence,
    payment,
    settlement: invocation
      ? settlement(invocation, evidence)
      : { state: null, null_reason: "invocation_not_found" },
    created_at: receipt.created_at.toISOString(),
    status_url: links(receipt.invocation_id, null).status_url,
  };
}
