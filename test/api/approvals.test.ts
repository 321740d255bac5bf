import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalChain, startLocalChain } from "../../shared/chain/local-chain.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { parseUsdc } from "../../shared/kernel/money.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { getQueue } from "../../shared/queues.js";
import { expireDueApprovals } from "../../shared/routing/approvals/expiry.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { type ApiResponse, api, errorCode } from "../helpers/http.js";
import { fundAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// Purchases above a key's approval_above wait for a supervisor key of the same agent, with the hold
// and the daily reservation taken and nothing else: no job, no provider call. Approve runs the call
// once; deny and expiry release the hold with refund evidence. A database of its own (a live paid
// gate on a local chain, as in paid-execute.test.ts).

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;

const usdc = (n: number) => parseUsdc(n, "/test");

beforeAll(async () => {
  ownDb = await useOwnDatabase("approvals");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

interface Team {
  buyer: TestAgent;
  /** approval_above 0.1, daily cap 1, not a supervisor. */
  worker: { id: string; key: string };
  /** A second key with the supervisor flag. */
  supervisor: { id: string; key: string };
}

async function team(): Promise<Team> {
  const buyer = await buildAgent();
  await fundAgent(buyer.agentId, usdc(2));
  const make = async (body: Record<string, unknown>) => {
    const res = await api("POST", "/api/keys", { key: buyer.apiKey, body });
    expect(res.status).toBe(201);
    return { id: res.body.key.key_id as string, key: res.body.api_key as string };
  };
  return {
    buyer,
    worker: await make({ name: "worker", approval_above_usdc: 0.1, limits: { daily_cap_usdc: 1 } }),
    supervisor: await make({ name: "supervisor", supervisor: true }),
  };
}

const listing = (price: number) =>
  buildListing({ endpointUrl: seller.url, price, sellerId: sellerAgent.agentId });

/** A 0.25 purchase by the worker key, held for approval. */
async function heldPurchase(t: Team) {
  const l = await listing(0.25);
  const res = await api("POST", `/api/invoke/${l.id}`, { key: t.worker.key, body: { input: { n: 1 } } });
  expect(res.status).toBe(202);
  return {
    listing: l,
    res,
    approvalId: res.body.approval_id as string,
    invocationId: res.body.invocation_id,
  };
}

const decide = (approvalId: string, decision: "approve" | "deny", key: string, note?: string) =>
  api("POST", `/api/approvals/${approvalId}/${decision}`, { key, body: note ? { note } : {} });

async function reservation(t: Team) {
  const list = await api("GET", "/api/keys", { key: t.buyer.apiKey });
  return list.body.keys.find((k: { key_id: string }) => k.key_id === t.worker.id).today;
}

async function finished(invocationId: string, key: string): Promise<ApiResponse> {
  return waitFor("the invocation to end", async () => {
    const res = await api("GET", `/api/execute/status/${invocationId}`, { key });
    return ["succeeded", "failed"].includes(res.body.status) ? res : undefined;
  });
}

const callsFor = (listingId: string) => seller.calls.filter((c) => c.body.listing_id === listingId).length;

describe("a purchase above approval_above", () => {
  it("answers 202 awaiting_approval: hold and reservation taken, no job, no provider call", async () => {
    const t = await team();
    const { listing: l, res, approvalId, invocationId } = await heldPurchase(t);
    expect(res.body).toMatchObject({
      success: false,
      status: "awaiting_approval",
      amount_usdc: "0.250000",
      approval_above_usdc: "0.100000",
    });
    expect(res.body.next_steps.join(" ")).toMatch(/approve/);
    expect(res.headers.get("location")).toBe(res.body.status_url);
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({
      available: usdc(1.75),
      held: usdc(0.25),
    });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.250000", remaining_usdc: "0.750000" });
    expect(await db()("job_outbox").where({ job_id: invocationId })).toHaveLength(0);
    expect(await getQueue("executions").getJob(invocationId)).toBeUndefined();
    await new Promise((r) => setTimeout(r, 300));
    expect(callsFor(l.id)).toBe(0);

    const status = await api("GET", `/api/execute/status/${invocationId}`, { key: t.worker.key });
    expect(status.body).toMatchObject({
      status: "awaiting_approval",
      approval: { approval_id: approvalId, status: "pending", amount_usdc: "0.250000" },
      payment: { state: "held", held_usdc: "0.250000" },
      attempts: [],
    });
    const audit = await db()("audit_events").where({ subject_type: "approval", subject_id: approvalId });
    expect(audit.map((a) => a.action)).toEqual(["approval.requested"]);
  });

  it("at or below the threshold the call runs at once; the router path is held like invoke", async () => {
    const t = await team();
    const cheap = await listing(0.1);
    expect(
      (await api("POST", `/api/invoke/${cheap.id}`, { key: t.worker.key, body: { input: {} } })).status,
    ).toBe(200);
    const task = `approve-${randomBytes(4).toString("hex")}`;
    await buildListing({ endpointUrl: seller.url, price: 0.2, tags: [task], sellerId: sellerAgent.agentId });
    const routed = await api("POST", "/api/execute", { key: t.worker.key, body: { task, input: {} } });
    expect(routed.status).toBe(202);
    expect(routed.body.status).toBe("awaiting_approval");
  });

  it("an idempotent replay while it waits answers the same 202", async () => {
    const t = await team();
    const l = await listing(0.25);
    const body = { input: {}, idempotency_key: `k-${randomBytes(4).toString("hex")}` };
    const first = await api("POST", `/api/invoke/${l.id}`, { key: t.worker.key, body });
    const again = await api("POST", `/api/invoke/${l.id}`, { key: t.worker.key, body });
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.approval_id).toBe(first.body.approval_id);
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ held: usdc(0.25) });
  });
});

describe("decisions", () => {
  it("approve queues the call, which runs once and is captured; a second decision is 409", async () => {
    const t = await team();
    const { listing: l, approvalId, invocationId } = await heldPurchase(t);
    const res = await decide(approvalId, "approve", t.supervisor.key, "looks fine");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      approval_id: approvalId,
      status: "approved",
      decided_by_key_id: t.supervisor.id,
      requested_by_key_id: t.worker.id,
      note: "looks fine",
    });
    const done = await finished(invocationId, t.worker.key);
    expect(done.body).toMatchObject({ status: "succeeded", approval: { status: "approved" } });
    expect(callsFor(l.id)).toBe(1);
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ available: usdc(1.75), held: 0n });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.000000", spent_usdc: "0.250000" });
    for (const decision of ["approve", "deny"] as const) {
      const again = await decide(approvalId, decision, t.buyer.apiKey);
      expect([again.status, errorCode(again)]).toEqual([409, "CONFLICT"]);
      expect(again.body.error.details.status).toBe("approved");
    }
    expect(callsFor(l.id)).toBe(1);
    const audit = await db()("audit_events")
      .where({ subject_type: "approval", subject_id: approvalId })
      .orderBy("id");
    expect(audit.map((a) => a.action)).toEqual(["approval.requested", "approval.approved"]);
  });

  it("deny releases the hold and the reservation with refund evidence; the call fails POLICY_BLOCKED", async () => {
    const t = await team();
    const { listing: l, approvalId, invocationId } = await heldPurchase(t);
    const res = await decide(approvalId, "deny", t.buyer.apiKey, "too expensive");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: "denied", invocation_status: "failed", note: "too expensive" });
    const status = await api("GET", `/api/execute/status/${invocationId}`, { key: t.worker.key });
    expect(status.body).toMatchObject({
      status: "failed",
      error: { code: "POLICY_BLOCKED" },
      approval: { status: "denied" },
      receipt_id: null,
      settlement: { state: "released" },
      payment: { state: "released", charged_usdc: "0.000000", refunded_usdc: "0.250000" },
    });
    expect(status.body.payment.evidence.refund).toMatchObject({ source: "ledger_release" });
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ available: usdc(2), held: 0n });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.000000", spent_usdc: "0.000000" });
    expect(callsFor(l.id)).toBe(0);
    const again = await decide(approvalId, "approve", t.supervisor.key);
    expect([again.status, again.body.error.details.status]).toEqual([409, "denied"]);
    const audit = await db()("audit_events")
      .where({ subject_type: "approval", subject_id: approvalId })
      .orderBy("id");
    expect(audit.map((a) => a.action)).toEqual(["approval.requested", "approval.denied"]);
  });

  it("approve racing deny: exactly one wins each time, and the money agrees with the winner", async () => {
    const t = await team();
    const held = await Promise.all(Array.from({ length: 4 }, () => heldPurchase(t)));
    const races = await Promise.all(
      held.map(({ approvalId }) =>
        Promise.all([
          decide(approvalId, "approve", t.supervisor.key),
          decide(approvalId, "deny", t.buyer.apiKey),
        ]),
      ),
    );
    let approved = 0;
    for (const [i, [approve, deny]] of races.entries()) {
      expect([approve.status, deny.status].sort(), `race ${i}`).toEqual([200, 409]);
      const winner = approve.status === 200 ? "approved" : "denied";
      const done = await finished(held[i]!.invocationId, t.worker.key);
      expect(done.body.status).toBe(winner === "approved" ? "succeeded" : "failed");
      expect(callsFor(held[i]!.listing.id)).toBe(winner === "approved" ? 1 : 0);
      if (winner === "approved") approved += 1;
    }
    const spent = usdc(0.25) * BigInt(approved);
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ available: usdc(2) - spent, held: 0n });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.000000" });
    const decisions = await db()("audit_events")
      .whereIn(
        "subject_id",
        held.map((h) => h.approvalId),
      )
      .whereIn("action", ["approval.approved", "approval.denied"]);
    expect(decisions).toHaveLength(4);
  });

  it("an expired approval is released by the sweep and can no longer be approved", async () => {
    const t = await team();
    const config = getConfig();
    overrideConfig({ ...config, approvalTtlSeconds: 1 });
    let purchase: Awaited<ReturnType<typeof heldPurchase>>;
    try {
      purchase = await heldPurchase(t);
    } finally {
      overrideConfig(config);
    }
    const expires = Date.parse(purchase.res.body.expires_at);
    await new Promise((r) => setTimeout(r, Math.max(0, expires - Date.now()) + 200));
    const early = await decide(purchase.approvalId, "approve", t.supervisor.key);
    expect([early.status, early.body.error.details.status]).toEqual([409, "expired"]);
    expect(await expireDueApprovals()).toBeGreaterThanOrEqual(1);
    const status = await api("GET", `/api/execute/status/${purchase.invocationId}`, { key: t.worker.key });
    expect(status.body).toMatchObject({
      status: "failed",
      error: { code: "POLICY_BLOCKED" },
      approval: { status: "expired" },
      payment: { state: "released", refunded_usdc: "0.250000" },
    });
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ available: usdc(2), held: 0n });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.000000" });
    expect(callsFor(purchase.listing.id)).toBe(0);
    // In the order they were written (without an order, PostgreSQL answers rows in any order).
    const audit = await db()("audit_events")
      .where({ subject_type: "approval", subject_id: purchase.approvalId })
      .orderBy("id");
    expect(audit.map((a) => a.action)).toEqual(["approval.requested", "approval.expired"]);
  });
});

describe("who may decide", () => {
  it("a non-supervisor key → 403, the requesting key itself → 403, another agent → 404; nothing changes", async () => {
    const t = await team();
    const { approvalId, invocationId } = await heldPurchase(t);
    const plain = (await api("POST", "/api/keys", { key: t.buyer.apiKey, body: {} })).body.api_key;
    const mixed = (
      await api("POST", "/api/keys", {
        key: t.buyer.apiKey,
        body: { supervisor: true, approval_above_usdc: 0.1 },
      })
    ).body.api_key;
    const own = await api("POST", `/api/invoke/${(await listing(0.25)).id}`, {
      key: mixed,
      body: { input: {} },
    });
    const stranger = await buildAgent();
    const before = await db()("approvals").orderBy("id").select("id", "status", "decided_at");

    for (const decision of ["approve", "deny"] as const) {
      const worker = await decide(approvalId, decision, t.worker.key);
      expect([worker.status, errorCode(worker)], decision).toEqual([403, "POLICY_BLOCKED"]);
      const nonSupervisor = await decide(approvalId, decision, plain);
      expect([nonSupervisor.status, errorCode(nonSupervisor)], decision).toEqual([403, "POLICY_BLOCKED"]);
      const other = await decide(approvalId, decision, stranger.apiKey);
      expect([other.status, errorCode(other)], decision).toEqual([404, "NOT_FOUND"]);
    }
    const self = await decide(own.body.approval_id, "approve", mixed);
    expect([self.status, errorCode(self)]).toEqual([403, "POLICY_BLOCKED"]);
    expect((await api("GET", `/api/approvals/${approvalId}`, { key: stranger.apiKey })).status).toBe(404);
    expect((await api("GET", `/api/approvals/${approvalId}`, { key: plain })).status).toBe(404);
    expect(await db()("approvals").orderBy("id").select("id", "status", "decided_at")).toEqual(before);
    expect((await api("GET", `/api/execute/status/${invocationId}`, { key: t.worker.key })).body.status).toBe(
      "awaiting_approval",
    );
  });

  it("revoking the requesting key denies its pending purchases at once: hold released, not approvable", async () => {
    const t = await team();
    const { listing: l, approvalId, invocationId } = await heldPurchase(t);
    const revoked = await api("POST", `/api/keys/${t.worker.id}/revoke`, { key: t.buyer.apiKey, body: {} });
    expect(revoked.status).toBe(200);
    const read = await api("GET", `/api/approvals/${approvalId}`, { key: t.supervisor.key });
    expect(read.body).toMatchObject({
      status: "denied",
      invocation_status: "failed",
      note: "requesting_key_revoked",
    });
    expect(await balances(t.buyer.agentId, "USDC")).toMatchObject({ available: usdc(2), held: 0n });
    expect(await reservation(t)).toMatchObject({ reserved_usdc: "0.000000", spent_usdc: "0.000000" });
    const approve = await decide(approvalId, "approve", t.supervisor.key);
    expect([approve.status, approve.body.error.details.status]).toEqual([409, "denied"]);
    const status = await api("GET", `/api/execute/status/${invocationId}`, { key: t.supervisor.key });
    expect(status.body).toMatchObject({ status: "failed", error: { code: "POLICY_BLOCKED" } });
    expect(callsFor(l.id)).toBe(0);
    const audit = await db()("audit_events")
      .where({ subject_type: "approval", subject_id: approvalId })
      .orderBy("id");
    expect(audit.map((a) => a.action)).toEqual(["approval.requested", "approval.denied"]);
    const revokeAudit = await db()("audit_events").where({
      action: "api_key.revoked",
      subject_id: t.worker.id,
    });
    expect(revokeAudit[0].data.denied_approval_ids).toEqual([approvalId]);
  });

  it("lists: a supervisor sees the agent's approvals, another key only those it asked for", async () => {
    const t = await team();
    const { approvalId } = await heldPurchase(t);
    const bySupervisor = await api("GET", "/api/approvals?status=pending", { key: t.supervisor.key });
    expect(bySupervisor.body.scope).toBe("agent");
    expect(bySupervisor.body.approvals.map((a: { approval_id: string }) => a.approval_id)).toEqual([
      approvalId,
    ]);
    const byWorker = await api("GET", "/api/approvals", { key: t.worker.key });
    expect(byWorker.body).toMatchObject({ scope: "this_key", approvals: [{ approval_id: approvalId }] });
    const plain = (await api("POST", "/api/keys", { key: t.buyer.apiKey, body: {} })).body.api_key;
    expect((await api("GET", "/api/approvals", { key: plain })).body.approvals).toEqual([]);
    const stranger = await buildAgent();
    expect((await api("GET", "/api/approvals", { key: stranger.apiKey })).body.approvals).toEqual([]);
  });
});
