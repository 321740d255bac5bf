import type { Db } from "../../db/knex.js";

export type SubscriptionStatus = "active" | "paused" | "cancelled";

export interface SubscriptionRow {
  id: string;
  order_id: string;
  buyer_agent_id: string;
  api_key_id: string | null;
  interval_seconds: number;
  status: SubscriptionStatus;
  paused_reason: string | null;
  created_at: Date;
  updated_at: Date;
  cancelled_at: Date | null;
  last_run_at: Date | null;
}

export interface RunRow {
  id: string;
  subscription_id: string;
  run_key: string;
  order_id: string | null;
  status: "charged" | "unpaid" | "skipped";
  reason: string | null;
  created_at: Date;
}

export async function insertSubscription(
  q: Db,
  row: Pick<SubscriptionRow, "order_id" | "buyer_agent_id" | "api_key_id" | "interval_seconds">,
): Promise<SubscriptionRow> {
  const [inserted] = await q<SubscriptionRow>("monitoring_subscriptions").insert(row).returning("*");
  return inserted!;
}

export async function findSubscription(q: Db, id: string): Promise<SubscriptionRow | undefined> {
  return q<SubscriptionRow>("monitoring_subscriptions").where({ id }).first();
}

export async function lockSubscription(q: Db, id: string): Promise<SubscriptionRow | undefined> {
  return q<SubscriptionRow>("monitoring_subscriptions").where({ id }).forUpdate().first();
}

export async function updateSubscription(
  q: Db,
  id: string,
  change: Partial<Pick<SubscriptionRow, "status" | "paused_reason">> & { cancelled?: true; ran?: true },
): Promise<SubscriptionRow> {
  const { cancelled, ran, ...fields } = change;
  const [row] = await q<SubscriptionRow>("monitoring_subscriptions")
    .where({ id })
    .update({
      ...fields,
      ...(cancelled ? { cancelled_at: q.fn.now() } : {}),
      ...(ran ? { last_run_at: q.fn.now() } : {}),
      updated_at: q.fn.now(),
    } as never)
    .returning("*");
  return row!;
}

export async function findRun(q: Db, subscriptionId: string, runKey: string): Promise<RunRow | undefined> {
  return q<RunRow>("monitoring_runs").where({ subscription_id: subscriptionId, run_key: runKey }).first();
}

export async function insertRun(
  q: Db,
  row: Pick<RunRow, "subscription_id" | "run_key" | "order_id" | "status" | "reason">,
): Promise<RunRow> {
  const [inserted] = await q<RunRow>("monitoring_runs").insert(row).returning("*");
  return inserted!;
}

export async function listRuns(q: Db, subscriptionId: string, limit: number): Promise<RunRow[]> {
  return q<RunRow>("monitoring_runs")
    .where({ subscription_id: subscriptionId })
    .orderBy("created_at", "desc")
    .limit(limit);
}
