import type { Knex } from "knex";
import { recordAudit } from "../../audit/index.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { findOwnedApiKey, type KeyPolicy, type Principal, returnDailySpend } from "../../identity/index.js";
import { isUuid } from "../../kernel/ids.js";
import { formatUsdc, micros } from "../../kernel/money.js";
import { logger } from "../../log.js";
import { retryTransient } from "../../money/index.js";
import { markJobSent } from "../../outbox/index.js";
import { enqueue } from "../../queues.js";
import { releaseForFailure } from "../paid-invocations.js";
import {
  type ApprovalRow,
  type ApprovalStatus,
  type ApprovalWithInvocation,
  decideApproval,
  failAwaitingInvocation,
  findApprovalForInvocation,
  findOwnedApproval,
  insertApproval,
  listApprovals,
  pendingApprovalIdsOfKey,
  releaseInvocationToQueue,
} from "../store/approvals.js";
import type { InvocationError } from "../store/invocations.js";

// Approvals (docs/payments.md "Approvals"): a purchase holding more than its key's approval_above waits, with its
// hold and daily reservation taken, for a supervisor key of the same agent. Approve → the invocation is
// queued through the outbox like any other; deny or expiry → it ends failed (POLICY_BLOCKED) and the
// hold and reservation are released with refund evidence. Each decision is a conditional update of the
// approval row, so approve and deny are each taken exactly once, whoever races.

/** True when a paid hold of this size must wait for a supervisor under the key's policy. */
export function needsApproval(policy: KeyPolicy, holdMicros: bigint): boolean {
  return policy.approvalAboveMicros !== null && holdMicros > policy.approvalAboveMicros;
}

/** Opens the approval for an invocation just committed as awaiting_approval, in its transaction. */
export async function requestApproval(
  trx: Knex.Transaction,
  principal: Principal,
  invocationId: string,
  holdMicros: bigint,
  requestId: string,
): Promise<ApprovalRow> {
  const approval = await insertApproval(trx, {
    agent_id: principal.agentId,
    invocation_id: invocationId,
    requested_by_key_id: principal.apiKeyId,
    amountMicros: holdMicros,
    thresholdMicros: principal.policy.approvalAboveMicros ?? 0n,
    ttlSeconds: getConfig().approvalTtlSeconds,
  });
  await recordAudit(trx, {
    actorAgentId: principal.agentId,
    action: "approval.requested",
    subjectType: "approval",
    subjectId: approval.id,
    requestId,
    data: { key_id: principal.apiKeyId, invocation_id: invocationId, amount_micros: holdMicros.toString() },
  });
  return approval;
}

const urls = (approvalId: string, invocationId: string) => {
  const base = getConfig().publicBaseUrl;
  return {
    approval_url: `${base}/api/approvals/${approvalId}`,
    status_url: `${base}/api/execute/status/${invocationId}`,
  };
};

/** The short form an invocation's status shows. */
export function approvalSummary(a: ApprovalRow) {
  return {
    approval_id: a.id,
    status: a.status,
    amount_usdc: formatUsdc(micros(a.amount_micros)),
    expires_at: a.expires_at.toISOString(),
    decided_at: a.decided_at?.toISOString() ?? null,
    approval_url: urls(a.id, a.invocation_id).approval_url,
  };
}

function approvalView(a: ApprovalWithInvocation) {
  return {
    ...approvalSummary(a),
    invocation_id: a.invocation_id,
    invocation_status: a.invocation_status,
    task: a.task,
    route: a.route,
    listing_id: a.listing_id,
    approval_above_usdc: formatUsdc(micros(a.threshold_micros)),
    requested_by_key_id: a.requested_by_key_id,
    created_at: a.created_at.toISOString(),
    decided_by_key_id: a.decided_by_key_id,
    note: a.note,
    status_url: urls(a.id, a.invocation_id).status_url,
  };
}

/** The 202 answer of an execute or invoke held for approval: what is reserved and what happens next. */
export async function awaitingApprovalResult(invocationId: string) {
  const a = (await findApprovalForInvocation(db(), invocationId))!;
  return {
    success: false as const,
    status: "awaiting_approval" as const,
    invocation_id: invocationId,
    approval_id: a.id,
    amount_usdc: formatUsdc(micros(a.amount_micros)),
    approval_above_usdc: formatUsdc(micros(a.threshold_micros)),
    expires_at: a.expires_at.toISOString(),
    message:
      "held for a supervisor's decision: the amount is held and reserved against the key's daily cap; no provider has been called",
    next_steps: [
      "a supervisor key of this agent approves: POST /api/approvals/{approval_id}/approve → the call is queued and runs",
      "or denies: POST /api/approvals/{approval_id}/deny → the invocation fails with POLICY_BLOCKED and the hold is released",
      "undecided at expires_at, the hold is released as if denied",
      "poll status_url for the outcome",
    ],
    ...urls(a.id, invocationId),
  };
}

function requireSupervisor(principal: Principal): void {
  if (!principal.policy.supervisor)
    throw new AppError("POLICY_BLOCKED", "only a supervisor key may decide approvals", {
      required: "supervisor",
      hint: "use a key of this agent created with supervisor: true (the registration key is one)",
    });
}

/** An approval this key may see: supervisors see all of the agent's, other keys those they requested. */
async function visibleApproval(principal: Principal, approvalId: string): Promise<ApprovalWithInvocation> {
  const a = isUuid(approvalId) ? await findOwnedApproval(db(), approvalId, principal.agentId) : undefined;
  if (!a || (!principal.policy.supervisor && a.requested_by_key_id !== principal.apiKeyId))
    throw new AppError("NOT_FOUND", "no approval with this id for this agent", { approval_id: approvalId });
  return a;
}

/** GET /api/approvals: newest first, optionally one status. */
export async function listApprovalsFor(
  principal: Principal,
  status: ApprovalStatus | undefined,
  limit: number,
) {
  const rows = await listApprovals(db(), principal.agentId, {
    status,
    limit,
    requestedByKeyId: principal.policy.supervisor ? undefined : principal.apiKeyId,
  });
  return { approvals: rows.map(approvalView), scope: principal.policy.supervisor ? "agent" : "this_key" };
}

/** GET /api/approvals/{id}. */
export async function readApproval(principal: Principal, approvalId: string) {
  return approvalView(await visibleApproval(principal, approvalId));
}

function notPending(a: ApprovalWithInvocation): AppError {
  const status = a.status === "pending" ? "expired" : a.status;
  return new AppError("CONFLICT", `this approval is already ${status}`, {
    approval_id: a.id,
    status,
    decided_at: a.decided_at?.toISOString() ?? null,
    expires_at: a.expires_at.toISOString(),
  });
}

/**
 * Ends a purchase still awaiting approval (denied or expired): the invocation fails with the given
 * error, its hold is released with refund and outcome evidence and its daily reservation returned, in
 * the caller's transaction. False when it was no longer awaiting approval.
 */
export async function releaseHeldPurchase(
  trx: Knex.Transaction,
  invocationId: string,
  error: InvocationError,
): Promise<boolean> {
  const row = await failAwaitingInvocation(trx, invocationId, error);
  if (!row) return false;
  const held = micros(row.hold_micros);
  if (held > 0n) {
    await releaseForFailure(trx, row, held, error);
    await returnDailySpend(trx, row.id);
  }
  return true;
}

type Decision = "approved" | "denied";

async function decide(
  principal: Principal,
  approvalId: string,
  decision: Decision,
  note: string | null,
  requestId: string,
) {
  requireSupervisor(principal);
  const a = await visibleApproval(principal, approvalId);
  // Already decided (by a supervisor, or denied when its key was revoked): say so before anything else.
  if (a.status !== "pending") throw notPending(a);
  if (decision === "approved") {
    if (a.requested_by_key_id === principal.apiKeyId)
      throw new AppError("POLICY_BLOCKED", "a key cannot approve its own purchase", {
        approval_id: a.id,
        hint: "another supervisor key of this agent decides",
      });
    const requester = await findOwnedApiKey(db(), a.requested_by_key_id, principal.agentId);
    if (requester?.revoked_at)
      throw new AppError(
        "CONFLICT",
        "the key that asked for this purchase has been revoked; deny it instead",
        {
          approval_id: a.id,
          requested_by_key_id: a.requested_by_key_id,
        },
      );
  }
  const decided = await retryTransient(() =>
    db().transaction((trx) =>
      applyDecision(trx, {
        approvalId: a.id,
        agentId: principal.agentId,
        decision,
        keyId: principal.apiKeyId,
        note,
        requestId,
        failure: "the purchase was denied by a supervisor",
      }),
    ),
  );
  if (!decided) throw notPending(await visibleApproval(principal, approvalId));
  if (decision === "approved") {
    try {
      await enqueue("executions", decided.invocation_id, { invocation_id: decided.invocation_id }, requestId);
      markJobSent("executions", decided.invocation_id);
    } catch (err) {
      logger().warn(
        { err, request_id: requestId, invocation_id: decided.invocation_id },
        "enqueue failed; the sweeper will send it",
      );
    }
  }
  return approvalView(await visibleApproval(principal, approvalId));
}

interface DecisionInput {
  approvalId: string;
  agentId: string;
  decision: "approved" | "denied";
  /** The key deciding (a supervisor's, or the one revoking the requesting key). */
  keyId: string;
  note: string | null;
  requestId: string;
  /** The invocation's error message when the purchase is denied. */
  failure: string;
}

/**
 * Decides one pending approval inside the caller's transaction: approved → the invocation goes to the
 * queue; denied → the purchase ends and its hold is released. Audited. Undefined when it was no longer
 * pending (decided, or expired), so nothing changes twice.
 */
async function applyDecision(trx: Knex.Transaction, d: DecisionInput): Promise<ApprovalRow | undefined> {
  const row = await decideApproval(trx, d.approvalId, d.agentId, {
    status: d.decision,
    keyId: d.keyId,
    note: d.note,
  });
  if (!row) return undefined;
  const moved =
    d.decision === "approved"
      ? await releaseInvocationToQueue(trx, row.invocation_id, "executions")
      : await releaseHeldPurchase(trx, row.invocation_id, { code: "POLICY_BLOCKED", message: d.failure });
  if (!moved) throw new Error(`approval ${row.id} was pending but its invocation was not awaiting approval`);
  await recordAudit(trx, {
    actorAgentId: d.agentId,
    action: d.decision === "approved" ? "approval.approved" : "approval.denied",
    subjectType: "approval",
    subjectId: row.id,
    requestId: d.requestId,
    data: {
      key_id: d.keyId,
      invocation_id: row.invocation_id,
      amount_micros: row.amount_micros,
      note: d.note,
    },
  });
  return row;
}

/**
 * Denies every approval still pending under a key being revoked, inside the revoking transaction: a
 * revoked key's purchases must not stay approvable. Each ends as a supervisor's denial would (hold
 * released, invocation failed with POLICY_BLOCKED), audited with the revoking key as the decider.
 */
export async function denyPendingOfRevokedKey(
  trx: Knex.Transaction,
  r: { agentId: string; revokedKeyId: string; byKeyId: string; requestId: string },
): Promise<string[]> {
  const denied: string[] = [];
  for (const approvalId of await pendingApprovalIdsOfKey(trx, r.agentId, r.revokedKeyId)) {
    const row = await applyDecision(trx, {
      approvalId,
      agentId: r.agentId,
      decision: "denied",
      keyId: r.byKeyId,
      note: "requesting_key_revoked",
      requestId: r.requestId,
      failure: "the purchase was denied: the key that asked for it was revoked",
    });
    if (row) denied.push(row.id);
  }
  return denied;
}

/** POST /api/approvals/{id}/approve: a supervisor key (not the requesting one) releases the call to run. */
export function approvePurchase(
  principal: Principal,
  approvalId: string,
  note: string | null,
  requestId: string,
) {
  return decide(principal, approvalId, "approved", note, requestId);
}

/** POST /api/approvals/{id}/deny: a supervisor key ends the purchase; the hold is released. */
export function denyPurchase(
  principal: Principal,
  approvalId: string,
  note: string | null,
  requestId: string,
) {
  return decide(principal, approvalId, "denied", note, requestId);
}
