import type { Db } from "./knex.js";

export type InvocationStatus = "queued" | "running" | "succeeded" | "failed";

export interface InvocationError {
  code: string;
  message: string;
}

export interface InvocationRow {
  id: string;
  agent_id: string;
  api_key_id: string;
  listing_id: string;
  task: string;
  route: string;
  input: Record<string, unknown>;
  max_cost_micros: string | null;
  price_micros: string;
  status: InvocationStatus;
  output: unknown;
  error: InvocationError | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

export interface AttemptRow {
  id: string;
  invocation_id: string;
  attempt_no: number;
  listing_id: string;
  status: "running" | "succeeded" | "failed" | "abandoned";
  error_code: string | null;
  error_message: string | null;
  http_status: number | null;
  latency_ms: number | null;
  started_at: Date;
  finished_at: Date | null;
  deadline_at: Date | null;
}

export const TERMINAL: readonly InvocationStatus[] = ["succeeded", "failed"];

export async function insertInvocation(
  q: Db,
  row: Pick<InvocationRow, "id" | "agent_id" | "api_key_id" | "listing_id" | "task" | "route" | "input"> & {
    max_cost_micros: bigint | null;
    price_micros: bigint;
  },
): Promise<InvocationRow> {
  const [inserted] = await q<InvocationRow>("invocations")
    .insert({
      ...row,
      input: JSON.stringify(row.input) as never,
      max_cost_micros: row.max_cost_micros?.toString() ?? null,
      price_micros: row.price_micros.toString(),
    })
    .returning("*");
  return inserted!;
}

export async function findInvocation(q: Db, id: string): Promise<InvocationRow | undefined> {
  return q<InvocationRow>("invocations").where({ id }).first();
}

/** Reads an invocation only if it belongs to the agent: another agent's id reads as absent. */
export async function findOwnedInvocation(
  q: Db,
  id: string,
  agentId: string,
): Promise<InvocationRow | undefined> {
  return q<InvocationRow>("invocations").where({ id, agent_id: agentId }).first();
}

/** queued|running → running; returns undefined when the invocation already ended. */
export async function markRunning(q: Db, id: string): Promise<InvocationRow | undefined> {
  const [row] = await q<InvocationRow>("invocations")
    .where({ id })
    .whereIn("status", ["queued", "running"])
    .update({ status: "running", started_at: q.raw("coalesce(started_at, now())") as never })
    .returning("*");
  return row;
}

/** running → succeeded|failed, exactly once: false when another worker already finished it. */
export async function finishInvocation(
  q: Db,
  id: string,
  outcome: { status: "succeeded"; output: unknown } | { status: "failed"; error: InvocationError },
): Promise<boolean> {
  const count = await q("invocations")
    .where({ id })
    .whereIn("status", ["queued", "running"])
    .update({
      status: outcome.status,
      output: outcome.status === "succeeded" ? JSON.stringify(outcome.output) : null,
      error: outcome.status === "failed" ? JSON.stringify(outcome.error) : null,
      completed_at: q.fn.now(),
    });
  return count === 1;
}

export async function listAttempts(q: Db, invocationId: string): Promise<AttemptRow[]> {
  return q<AttemptRow>("invocation_attempts").where({ invocation_id: invocationId }).orderBy("attempt_no");
}

/**
 * Every attempt of an invocation, each marked live when it is 'running' and inside its deadline (its
 * call may still be in flight), in one read so that the two facts cannot disagree.
 */
export async function readAttempts(q: Db, invocationId: string): Promise<(AttemptRow & { live: boolean })[]> {
  return q<AttemptRow & { live: boolean }>("invocation_attempts")
    .select("*", q.raw("(status = 'running' and coalesce(deadline_at > now(), false)) as live"))
    .where({ invocation_id: invocationId })
    .orderBy("attempt_no");
}

/** 'running' attempts past their deadline belong to a worker that died mid-call: closed as abandoned. */
export async function abandonExpiredAttempts(q: Db, invocationId: string): Promise<number> {
  return q("invocation_attempts")
    .where({ invocation_id: invocationId, status: "running" })
    .andWhere((w) => w.whereNull("deadline_at").orWhere("deadline_at", "<=", q.fn.now()))
    .update({
      status: "abandoned",
      finished_at: q.fn.now(),
      error_message: "worker stopped before the call returned",
    });
}

/** Records an attempt before its call; UNIQUE(invocation_id, attempt_no) stops two runs taking one number. */
export async function insertAttempt(
  q: Db,
  row: Pick<AttemptRow, "invocation_id" | "attempt_no" | "listing_id">,
  deadlineMs: number,
): Promise<AttemptRow> {
  const [inserted] = await q<AttemptRow>("invocation_attempts")
    .insert({ ...row, deadline_at: q.raw("now() + make_interval(secs => ?)", [deadlineMs / 1000]) as never })
    .returning("*");
  return inserted!;
}

/** running → its result; false when the attempt was no longer running (closed by another run). */
export async function finishAttempt(
  q: Db,
  id: string,
  result: Pick<AttemptRow, "status" | "error_code" | "error_message" | "http_status" | "latency_ms">,
): Promise<boolean> {
  const count = await q("invocation_attempts")
    .where({ id, status: "running" })
    .update({ ...result, finished_at: q.fn.now() });
  return count === 1;
}
