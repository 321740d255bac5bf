import { randomUUID } from "node:crypto";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, validationError } from "../errors.js";
import type { Principal } from "../identity/index.js";
import { formatUsdc } from "../kernel/money.js";
import { logger } from "../log.js";
import { assertCustodyOpen, assertPaidExecutionEnabled, paidGate, retryTransient } from "../money/index.js";
import { getQueue } from "../queues.js";
import { holdForOrder } from "./money.js";
import { enqueueProbe, readOwnOrder } from "./orders.js";
import {
  findRun,
  findSubscription,
  insertRun,
  insertSubscription,
  listRuns,
  lockSubscription,
  type RunRow,
  type SubscriptionRow,
  updateSubscription,
} from "./store/monitoring.js";
import { insertOrderWithJob } from "./store/orders.js";
import { VERIFICATION_PRICE_MICROS } from "./terms.js";

// Monitoring (docs/verification.md "Monitoring"): a subscription re-probes an order's target every
// interval, each run a separate 5 USDC order with its own hold, capture and attestation. Runs come from a
// BullMQ job scheduler per subscription, which exists only when VERIFICATION_MONITORING_SCHEDULER is on
// (off by default); a run can always be processed directly (processMonitoringRun). A run that cannot be
// paid pauses the subscription with a reason: the ledger refuses to go below zero, and nothing is held.

const MONITORING_QUEUE = "monitoring-runs";

const notFound = (id: string) =>
  new AppError("NOT_FOUND", "no monitoring subscription with this id for this caller", {
    subscription_id: id,
  });

const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);

async function ownSubscription(agentId: string, id: string): Promise<SubscriptionRow> {
  const row = isUuid(id) ? await findSubscription(db(), id) : undefined;
  if (!row || row.buyer_agent_id !== agentId) throw notFound(id);
  return row;
}

/** Starts (or replaces) the subscription's job scheduler; only when the scheduler switch is on. */
async function schedule(subscription: SubscriptionRow): Promise<void> {
  if (!getConfig().verificationMonitoringScheduler) return;
  await getQueue(MONITORING_QUEUE).upsertJobScheduler(
    subscription.id,
    { every: subscription.interval_seconds * 1000 },
    { name: MONITORING_QUEUE, data: { subscription_id: subscription.id } },
  );
}

async function unschedule(subscriptionId: string): Promise<void> {
  if (!getConfig().verificationMonitoringScheduler) return;
  await getQueue(MONITORING_QUEUE)
    .removeJobScheduler(subscriptionId)
    .catch((err) => logger().warn({ err, subscription_id: subscriptionId }, "job scheduler not removed"));
}

/** POST /api/verification/orders/:id/monitoring: the buyer's order, an interval ≥ the minimum. */
export async function createMonitoring(
  principal: Principal,
  orderId: string,
  intervalSeconds: number,
): Promise<SubscriptionRow> {
  const order = await readOwnOrder(principal.agentId, orderId);
  const min = getConfig().verificationMinIntervalSeconds;
  if (intervalSeconds < min)
    throw validationError(`interval must be at least ${min} seconds`, [
      { path: "/interval", message: `must be >= ${min}` },
    ]);
  // Subscribing commits the buyer to paid runs: refused like any paid route while paid execution is off.
  await assertPaidExecutionEnabled();
  const subscription = await insertSubscription(db(), {
    order_id: order.id,
    buyer_agent_id: principal.agentId,
    api_key_id: principal.apiKeyId,
    interval_seconds: intervalSeconds,
  });
  await schedule(subscription);
  return subscription;
}

/** POST /api/verification/monitoring/:id/cancel: final; the scheduler is removed. Repeating it is harmless. */
export async function cancelMonitoring(
  principal: Principal,
  subscriptionId: string,
): Promise<SubscriptionRow> {
  const row = await ownSubscription(principal.agentId, subscriptionId);
  const cancelled =
    row.status === "cancelled"
      ? row
      : await updateSubscription(db(), row.id, { status: "cancelled", paused_reason: null, cancelled: true });
  await unschedule(row.id);
  return cancelled;
}

export async function subscriptionView(row: SubscriptionRow) {
  const runs: RunRow[] = await listRuns(db(), row.id, 20);
  return {
    subscription_id: row.id,
    order_id: row.order_id,
    interval_seconds: row.interval_seconds,
    status: row.status,
    paused_reason: row.paused_reason,
    price_per_run_usdc: formatUsdc(VERIFICATION_PRICE_MICROS),
    scheduler_enabled: getConfig().verificationMonitoringScheduler,
    created_at: row.created_at.toISOString(),
    cancelled_at: row.cancelled_at?.toISOString() ?? null,
    last_run_at: row.last_run_at?.toISOString() ?? null,
    runs: runs.map((r) => ({
      run_id: r.id,
      status: r.status,
      reason: r.reason,
      order_id: r.order_id,
      created_at: r.created_at.toISOString(),
    })),
  };
}

export interface RunOutcome {
  status: "charged" | "unpaid" | "skipped";
  reason: string | null;
  order_id: string | null;
  replayed: boolean;
}

const outcomeOf = (run: RunRow, replayed: boolean): RunOutcome => ({
  status: run.status,
  reason: run.reason,
  order_id: run.order_id,
  replayed,
});

/**
 * One monitoring run: a new order with its own 5 USDC hold (and outbox row: the probes worker runs it),
 * recorded once per run key (the scheduler job's id), so a redelivered job never charges twice. When the
 * hold is refused for short funds the run is recorded unpaid and the subscription paused with the reason.
 * Not active, or paid execution off: the run is skipped, nothing charged.
 */
export async function processMonitoringRun(
  payload: { subscription_id: string },
  runKey: string,
): Promise<RunOutcome> {
  const earlier = await findRun(db(), payload.subscription_id, runKey);
  if (earlier) {
    if (earlier.order_id) await enqueueProbe(earlier.order_id, null);
    return outcomeOf(earlier, true);
  }
  const subscription = await findSubscription(db(), payload.subscription_id);
  if (!subscription) throw new Error(`monitoring subscription ${payload.subscription_id} does not exist`);
  const gate = await paidGate();
  const skipReason =
    subscription.status !== "active"
      ? `subscription_${subscription.status}`
      : gate.enabled
        ? null
        : `paid_execution_unavailable: ${gate.reason}`;
  if (skipReason) {
    const run = await insertRun(db(), {
      subscription_id: subscription.id,
      run_key: runKey,
      order_id: null,
      status: "skipped",
      reason: skipReason,
    }).catch(async () => (await findRun(db(), subscription.id, runKey))!);
    return outcomeOf(run, false);
  }
  const origin = await findOrderOf(subscription);
  try {
    const run = await retryTransient(() =>
      db().transaction(async (trx) => {
        const locked = await lockSubscription(trx, subscription.id);
        const again = await findRun(trx, subscription.id, runKey);
        if (again) return again;
        if (locked?.status !== "active") throw new Error("subscription changed while running");
        await assertCustodyOpen(trx);
        const order = await insertOrderWithJob(trx, {
          id: randomUUID(),
          buyer_agent_id: subscription.buyer_agent_id,
          api_key_id: subscription.api_key_id,
          target_url: origin.target_url,
          protocol: origin.protocol,
          listing_id: origin.listing_id,
          rerun_of: null,
          subscription_id: subscription.id,
          idempotency_key: null,
          fingerprint: null,
          price_micros: VERIFICATION_PRICE_MICROS.toString(),
        });
        await holdForOrder(trx, order, "monitoring_run");
        await updateSubscription(trx, subscription.id, { ran: true });
        return insertRun(trx, {
          subscription_id: subscription.id,
          run_key: runKey,
          order_id: order.id,
          status: "charged",
          reason: null,
        });
      }),
    );
    if (run.order_id) await enqueueProbe(run.order_id, null);
    return outcomeOf(run, false);
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== "PAYMENT_REQUIRED") throw error;
    const details = error.details ?? {};
    const reason = `insufficient_funds: available ${String(details.available_usdc ?? "?")} USDC, a run costs ${formatUsdc(VERIFICATION_PRICE_MICROS)} USDC`;
    const run = await db().transaction(async (trx) => {
      const again = await findRun(trx, subscription.id, runKey);
      if (again) return again;
      await updateSubscription(trx, subscription.id, { status: "paused", paused_reason: reason });
      return insertRun(trx, {
        subscription_id: subscription.id,
        run_key: runKey,
        order_id: null,
        status: "unpaid",
        reason,
      });
    });
    await unschedule(subscription.id);
    return outcomeOf(run, false);
  }
}

async function findOrderOf(subscription: SubscriptionRow) {
  return readOwnOrder(subscription.buyer_agent_id, subscription.order_id);
}

/** A subscription for its buyer (BOLA: anyone else gets 404). */
export async function readOwnSubscription(agentId: string, id: string): Promise<SubscriptionRow> {
  return ownSubscription(agentId, id);
}
