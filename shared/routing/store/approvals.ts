import type { Db } from "../../db/knex.js";
import { insertReturningAll, preparedRaw } from "../../db/prepared.js";
import {
  type InvocationError,
  type InvocationRow,
  invocationColumns,
  type NewInvocation,
} from "./invocations.js";

export type ApprovalStatus = "pending" | "approved" | "denied" | "expired";

export interface ApprovalRow {
  id: string;
  agent_id: string;
  invocation_id: string;
  requested_by_key_id: string;
  amount_micros: string;
  threshold_micros: string;
  status: ApprovalStatus;
  created_at: Date;
  expires_at: Date;
  decided_at: Date | null;
  decided_by_key_id: string | null;
  note: string | null;
}

/** An approval with what its views show of the invocation behind it. */
export interface ApprovalWithInvocation extends ApprovalRow {
  task: string;
  route: string;
  listing_id: string;
  invocation_status: InvocationRow["status"];
}

/**
 * Inserts an invocation that waits for a supervisor: status awaiting_approval and, unlike
 * insertInvocationWithJob, no outbox row — nothing may enqueue it before the decision.
 */
export async function insertAwaitingInvocation(q: Db, row: NewInvocation): Promise<InvocationRow> {
  // A named statement, like the submission's other statements: sent in one flight with them, each goes
  // out in the order it was asked for only if each takes the same path to the driver (preparedRaw).
  const insert = insertReturningAll("invocations", {
    ...invocationColumns(row),
    status: "awaiting_approval",
  });
  return (await preparedRaw(q, insert.sql, insert.bindings)).rows[0] as InvocationRow;
}

export async function insertApproval(
  q: Db,
  a: Pick<ApprovalRow, "agent_id" | "invocation_id" | "requested_by_key_id"> & {
    amountMicros: bigint;
    thresholdMicros: bigint;
    ttlSeconds: number;
  },
): Promise<ApprovalRow> {
  const [row] = await q<ApprovalRow>("approvals")
    .insert({
      agent_id: a.agent_id,
      invocation_id: a.invocation_id,
      requested_by_key_id: a.requested_by_key_id,
      amount_micros: a.amountMicros.toString(),
      threshold_micros: a.thresholdMicros.toString(),
      expires_at: q.raw("now() + make_interval(secs => ?)", [a.ttlSeconds]) as never,
    })
    .returning("*");
  return row!;
}

function withInvocation(q: Db) {
  return q("approvals as a")
    .join("invocations as i", "i.id", "a.invocation_id")
    .select("a.*", "i.task", "i.route", "i.listing_id", "i.status as invocation_status");
}

/** One of the agent's approvals; another agent's reads as absent. */
export async function findOwnedApproval(
  q: Db,
  id: string,
  agentId: string,
): Promise<ApprovalWithInvocation | undefined> {
  return withInvocation(q).where({ "a.id": id, "a.agent_id": agentId }).first();
}

export async function findApprovalForInvocation(
  q: Db,
  invocationId: string,
): Promise<ApprovalRow | undefined> {
  return q<ApprovalRow>("approvals").where({ invocation_id: invocationId }).first();
}

/** The agent's approvals, newest first; optionally only one status, or only those one key requested. */
export async function listApprovals(
  q: Db,
  agentId: string,
  filter: { status?: ApprovalStatus; requestedByKeyId?: string; limit: number },
): Promise<ApprovalWithInvocation[]> {
  const query = withInvocation(q).where({ "a.agent_id": agentId });
  if (filter.status) query.andWhere({ "a.status": filter.status });
  if (filter.requestedByKeyId) query.andWhere({ "a.requested_by_key_id": filter.requestedByKeyId });
  return query
    .orderBy([
      { column: "a.created_at", order: "desc" },
      { column: "a.id", order: "desc" },
    ])
    .limit(filter.limit);
}

/**
 * pending → approved|denied, once: only while pending and not past its expiry. Concurrent deciders
 * queue on the row lock and re-check the condition on the committed row, so exactly one wins.
 */
/** Ids of the approvals still pending (undecided, whatever their expiry) that a key asked for. */
export async function pendingApprovalIdsOfKey(q: Db, agentId: string, keyId: string): Promise<string[]> {
  const rows = await q("approvals")
    .where({ agent_id: agentId, requested_by_key_id: keyId, status: "pending" })
    .orderBy("created_at")
    .select<{ id: string }[]>("id");
  return rows.map((r) => r.id);
}

export async function decideApproval(
  q: Db,
  id: string,
  agentId: string,
  decision: { status: "approved" | "denied"; keyId: string; note: string | null },
): Promise<ApprovalRow | undefined> {
  const [row] = await q<ApprovalRow>("approvals")
    .where({ id, agent_id: agentId, status: "pending" })
    .andWhere("expires_at", ">", q.fn.now())
    .update({
      status: decision.status,
      decided_by_key_id: decision.keyId,
      decided_at: q.fn.now() as never,
      note: decision.note,
    })
    .returning("*");
  return row;
}

/** Pending approvals past their expiry, locked so concurrent sweepers never take the same one. */
export async function lockExpiredApprovals(q: Db, limit: number): Promise<ApprovalRow[]> {
  return q<ApprovalRow>("approvals")
    .where({ status: "pending" })
    .andWhere("expires_at", "<=", q.fn.now())
    .orderBy("expires_at")
    .limit(limit)
    .forUpdate()
    .skipLocked();
}

export async function markApprovalExpired(q: Db, id: string): Promise<void> {
  await q("approvals").where({ id, status: "pending" }).update({ status: "expired", decided_at: q.fn.now() });
}

/** awaiting_approval → queued with its outbox row (job id = invocation id), in one statement. */
export async function releaseInvocationToQueue(q: Db, invocationId: string, queue: string): Promise<boolean> {
  const result = await q.raw(
    `with inv as (
       update invocations set status = 'queued'
        where id = ? and status = 'awaiting_approval'
       returning id
     ), job as (
       insert into job_outbox (queue, job_id, payload)
       select ?, inv.id::text, jsonb_build_object('invocation_id', inv.id) from inv
     )
     select count(*)::int as n from inv`,
    [invocationId, queue],
  );
  return result.rows[0]?.n === 1;
}

/** awaiting_approval → failed, once; what the release of its hold needs, or undefined. */
export async function failAwaitingInvocation(
  q: Db,
  invocationId: string,
  error: InvocationError,
): Promise<{ id: string; agent_id: string; hold_micros: string } | undefined> {
  const [row] = await q("invocations")
    .where({ id: invocationId, status: "awaiting_approval" })
    .update({ status: "failed", error: JSON.stringify(error), completed_at: q.fn.now() })
    .returning(["id", "agent_id", "hold_micros"]);
  return row;
}
