import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { closeSafeFetch } from "../../shared/net/safe-fetch.js";
import { getQueue } from "../../shared/queues.js";
import { processMonitoringRun, processOrder } from "../../shared/verification/index.js";
import { startMonitoringRunsWorker } from "../../workers/monitoring-runs.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";
import { startJsonTarget, type TargetServer } from "../helpers/verification-targets.js";

// Monitoring subscriptions: each run a separate 5 USDC order, a run that cannot be paid pauses the
// subscription (never a negative balance), cancel, BOLA, and the scheduler switch (off by default). Runs
// are processed directly (processMonitoringRun, then the order's probe), as the workers would.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let target: TargetServer;

beforeAll(async () => {
  ownDb = await useOwnDatabase("monitor");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ verificationMinIntervalSeconds: 60 });
  service = await startService({ worker: false, sweeper: false });
  target = await startJsonTarget(200, { up: true });
});

afterAll(async () => {
  await getQueue("monitoring-runs")
    .obliterate({ force: true })
    .catch(() => {});
  await getQueue("verification-probes")
    .obliterate({ force: true })
    .catch(() => {});
  await target?.close();
  await closeSafeFetch();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

/** A buyer with `amount` USDC and one completed order (which cost 5 of it). */
async function buyerWithOrder(amount: number) {
  const buyer = await fundedAgent(amount);
  const res = await api("POST", "/api/verification/orders", {
    key: buyer.apiKey,
    body: { target: target.url, protocol: "http-json" },
  });
  expect(res.status).toBe(202);
  await processOrder({ order_id: res.body.order_id });
  return { buyer, orderId: res.body.order_id as string };
}

async function subscribe(key: string, orderId: string, interval = 3600) {
  return api("POST", `/api/verification/orders/${orderId}/monitoring`, { key, body: { interval } });
}

describe("monitoring", () => {
  it("records a subscription with the scheduler off by default: no job scheduler exists", async () => {
    const { buyer, orderId } = await buyerWithOrder(5);
    const res = await subscribe(buyer.apiKey, orderId);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      order_id: orderId,
      interval_seconds: 3600,
      status: "active",
      scheduler_enabled: false,
      price_per_run_usdc: "5.000000",
      runs: [],
    });
    expect(await getQueue("monitoring-runs").getJobScheduler(res.body.subscription_id)).toBeFalsy();
    expect((await api("GET", "/api/verification")).body.monitoring_scheduler_enabled).toBe(false);
  });

  it("refuses an interval under the minimum with a 400 and writes nothing", async () => {
    const { buyer, orderId } = await buyerWithOrder(5);
    const before = await db()("monitoring_subscriptions").count({ n: "*" });
    const res = await subscribe(buyer.apiKey, orderId, 59);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(await db()("monitoring_subscriptions").count({ n: "*" })).toEqual(before);
  });

  it("each run is a separate 5 USDC order; a redelivered run charges nothing more", async () => {
    const { buyer, orderId } = await buyerWithOrder(15);
    const sub = (await subscribe(buyer.apiKey, orderId)).body;
    const first = await processMonitoringRun({ subscription_id: sub.subscription_id }, "run-1");
    expect(first).toMatchObject({ status: "charged", replayed: false });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(5), held: usdc(5) });
    expect(await processMonitoringRun({ subscription_id: sub.subscription_id }, "run-1")).toMatchObject({
      status: "charged",
      order_id: first.order_id,
      replayed: true,
    });
    await processOrder({ order_id: first.order_id! });
    const runOrder = await api("GET", `/api/verification/orders/${first.order_id}`, { key: buyer.apiKey });
    expect(runOrder.body).toMatchObject({
      subscription_id: sub.subscription_id,
      verdict: "verified",
      payment: { state: "captured" },
    });
    expect(runOrder.body.attestation_id).toBeTruthy();
    const second = await processMonitoringRun({ subscription_id: sub.subscription_id }, "run-2");
    expect(second.order_id).not.toBe(first.order_id);
    await processOrder({ order_id: second.order_id! });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 0n, held: 0n });
  });

  it("a run that cannot be paid pauses the subscription with a reason; the balance never goes negative", async () => {
    const { buyer, orderId } = await buyerWithOrder(7);
    const sub = (await subscribe(buyer.apiKey, orderId)).body;
    const ledgerBefore = await db()("ledger_transactions").count({ n: "*" });
    const run = await processMonitoringRun({ subscription_id: sub.subscription_id }, "run-short");
    expect(run).toMatchObject({ status: "unpaid", order_id: null });
    expect(run.reason).toMatch(/^insufficient_funds: available 2\.000000 USDC/);
    expect(await db()("ledger_transactions").count({ n: "*" })).toEqual(ledgerBefore);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(2), held: 0n });
    const row = await db()("monitoring_subscriptions").where({ id: sub.subscription_id }).first();
    expect(row).toMatchObject({ status: "paused" });
    expect(row.paused_reason).toMatch(/insufficient_funds/);
    // Paused: later runs are skipped, nothing charged.
    expect(await processMonitoringRun({ subscription_id: sub.subscription_id }, "run-after")).toMatchObject({
      status: "skipped",
      reason: "subscription_paused",
    });
    expect(await db()("ledger_transactions").count({ n: "*" })).toEqual(ledgerBefore);
  });

  it("cancel: only the buyer (others 404); runs after it are skipped and charge nothing", async () => {
    const { buyer, orderId } = await buyerWithOrder(20);
    const stranger = await fundedAgent(1);
    const sub = (await subscribe(buyer.apiKey, orderId)).body;
    const path = `/api/verification/monitoring/${sub.subscription_id}/cancel`;
    const denied = await api("POST", path, { key: stranger.apiKey });
    expect(denied.status).toBe(404);
    expect(errorCode(denied)).toBe("NOT_FOUND");
    const cancelled = await api("POST", path, { key: buyer.apiKey });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: "cancelled" });
    expect(cancelled.body.cancelled_at).toBeTruthy();
    expect((await api("POST", path, { key: buyer.apiKey })).body.status).toBe("cancelled");
    expect(
      await processMonitoringRun({ subscription_id: sub.subscription_id }, "after-cancel"),
    ).toMatchObject({
      status: "skipped",
      reason: "subscription_cancelled",
    });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(15), held: 0n });
  });

  it("with VERIFICATION_MONITORING_SCHEDULER on, a subscription gets a job scheduler and cancel removes it", async () => {
    const config = getConfig();
    overrideConfig({ verificationMonitoringScheduler: true });
    try {
      expect((await api("GET", "/api/verification")).body.monitoring_scheduler_enabled).toBe(true);
      const { buyer, orderId } = await buyerWithOrder(5);
      const sub = (await subscribe(buyer.apiKey, orderId, 7200)).body;
      expect(sub.scheduler_enabled).toBe(true);
      const scheduler = await getQueue("monitoring-runs").getJobScheduler(sub.subscription_id);
      expect(scheduler).toMatchObject({ key: sub.subscription_id, every: 7_200_000 });
      await api("POST", `/api/verification/monitoring/${sub.subscription_id}/cancel`, { key: buyer.apiKey });
      expect(await getQueue("monitoring-runs").getJobScheduler(sub.subscription_id)).toBeFalsy();
    } finally {
      overrideConfig(config);
    }
  });

  it("the monitoring-runs worker runs a scheduled subscription: the scheduler's job becomes a charged run", async () => {
    const config = getConfig();
    overrideConfig({ verificationMonitoringScheduler: true, verificationMinIntervalSeconds: 1 });
    const worker = startMonitoringRunsWorker();
    try {
      await worker.waitUntilReady();
      const { buyer, orderId } = await buyerWithOrder(10);
      const sub = (await subscribe(buyer.apiKey, orderId, 1)).body;
      let runs: { status: string; order_id: string | null; run_key: string }[] = [];
      for (let i = 0; i < 200 && runs.length === 0; i++) {
        runs = await db()("monitoring_runs").where({ subscription_id: sub.subscription_id });
        if (runs.length === 0) await new Promise((r) => setTimeout(r, 50));
      }
      expect(runs[0]).toMatchObject({ status: "charged" });
      expect(runs[0]!.run_key).toContain(sub.subscription_id);
      const runOrder = await db()("verification_orders").where({ id: runs[0]!.order_id }).first();
      expect(runOrder).toMatchObject({ subscription_id: sub.subscription_id, charge_state: "held" });
      await api("POST", `/api/verification/monitoring/${sub.subscription_id}/cancel`, { key: buyer.apiKey });
      expect(await getQueue("monitoring-runs").getJobScheduler(sub.subscription_id)).toBeFalsy();
    } finally {
      await worker.close();
      overrideConfig(config);
    }
  });
});
