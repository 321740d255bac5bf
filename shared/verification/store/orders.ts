import type { Db } from "../../db/knex.js";

export type Protocol = "http-json" | "x402" | "mcp";
export type Verdict = "verified" | "reachable" | "failed";
export type OrderStatus = "queued" | "running" | "completed" | "not_run";
export type ChargeState = "held" | "captured" | "released";

export interface ProbeCheck {
  name: string;
  passed: boolean;
  observation: Record<string, unknown>;
}

export interface OrderRow {
  id: string;
  buyer_agent_id: string;
  api_key_id: string | null;
  target_url: string;
  protocol: Protocol;
  listing_id: string | null;
  rerun_of: string | null;
  subscription_id: string | null;
  idempotency_key: string | null;
  fingerprint: string | null;
  price_micros: string;
  status: OrderStatus;
  charge_state: ChargeState;
  verdict: Verdict | null;
  checks: ProbeCheck[] | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

export type NewOrder = Pick<
  OrderRow,
  | "id"
  | "buyer_agent_id"
  | "api_key_id"
  | "target_url"
  | "protocol"
  | "listing_id"
  | "rerun_of"
  | "subscription_id"
  | "idempotency_key"
  | "fingerprint"
  | "price_micros"
>;

/**
 * Inserts an order and, in the same statement, its verification-probes outbox row (the outbox's
 * contract): the job is recorded with the order and re-sent by the sweeper if the enqueue after commit fails.
 */
export async function insertOrderWithJob(q: Db, row: NewOrder): Promise<OrderRow> {
  const insert = q("verification_orders").insert(row).returning("*").toSQL();
  const result = await q.raw(
    `with o as (${insert.sql}),
     job as (
       insert into job_outbox (queue, job_id, payload)
       select 'verification-probes', o.id::text, jsonb_build_object('order_id', o.id) from o
     )
     select * from o`,
    insert.bindings,
  );
  return result.rows[0] as OrderRow;
}

export async function findOrder(q: Db, id: string): Promise<OrderRow | undefined> {
  return q<OrderRow>("verification_orders").where({ id }).first();
}

/** Locks an order for the transaction that settles it, so two deliveries of one job settle it once. */
export async function lockOrder(q: Db, id: string): Promise<OrderRow | undefined> {
  return q<OrderRow>("verification_orders").where({ id }).forUpdate().first();
}

export async function findOrderByKey(
  q: Db,
  buyerAgentId: string,
  key: string,
): Promise<OrderRow | undefined> {
  return q<OrderRow>("verification_orders")
    .where({ buyer_agent_id: buyerAgentId, idempotency_key: key })
    .first();
}

/** queued → running (a redelivered job finds it running and runs it again: probes are read-only). */
export async function markOrderRunning(q: Db, id: string): Promise<void> {
  await q("verification_orders")
    .where({ id })
    .whereIn("status", ["queued", "running"])
    .update({ status: "running", updated_at: q.fn.now() });
}

export async function completeOrder(
  q: Db,
  id: string,
  result: { verdict: Verdict; checks: ProbeCheck[] },
): Promise<void> {
  await q("verification_orders")
    .where({ id })
    .update({
      status: "completed",
      charge_state: "captured",
      verdict: result.verdict,
      checks: JSON.stringify(result.checks),
      completed_at: q.fn.now(),
      updated_at: q.fn.now(),
    });
}

export async function markOrderNotRun(q: Db, id: string, reason: string): Promise<void> {
  await q("verification_orders").where({ id }).update({
    status: "not_run",
    charge_state: "released",
    failure_reason: reason,
    completed_at: q.fn.now(),
    updated_at: q.fn.now(),
  });
}

/** Orders still queued or running whose last change is older than the given age: their job was lost. */
export async function listStaleOrderIds(q: Db, olderThanMinutes: number, limit: number): Promise<string[]> {
  const rows = await q("verification_orders")
    .select("id")
    .whereIn("status", ["queued", "running"])
    .andWhere("updated_at", "<", q.raw("now() - make_interval(mins => ?)", [olderThanMinutes]))
    .orderBy("updated_at")
    .limit(limit);
  return rows.map((r: { id: string }) => r.id);
}

/** Orders of one subscription (its monitoring runs), newest first. */
export async function listSubscriptionOrders(
  q: Db,
  subscriptionId: string,
  limit: number,
): Promise<OrderRow[]> {
  return q<OrderRow>("verification_orders")
    .where({ subscription_id: subscriptionId })
    .orderBy("created_at", "desc")
    .limit(limit);
}

export async function countRows(
  q: Db,
): Promise<{ orders: number; attestations: number; subscriptions: number }> {
  const result = await q.raw(
    `select (select count(*) from verification_orders)::int as orders,
            (select count(*) from attestations)::int as attestations,
            (select count(*) from monitoring_subscriptions)::int as subscriptions`,
  );
  return result.rows[0];
}
