import { randomBytes } from "node:crypto";
import canonicalize from "canonicalize";
import { compactVerify, createRemoteJWKSet } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import { closeSafeFetch } from "../../shared/net/safe-fetch.js";
import { getQueue } from "../../shared/queues.js";
import { abandonOrder, abandonStaleOrders } from "../../shared/verification/index.js";
import { startVerificationProbesWorker } from "../../workers/verification-probes.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent, rowCounts, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startGatedSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import {
  startJsonTarget,
  startMcpTarget,
  startX402Target,
  type TargetServer,
} from "../helpers/verification-targets.js";

// The verification service over HTTP on a live gate (a local chain as the rail, custody open): orders
// charged through the ledger, probes of real local servers by the verification-probes worker, public
// attestations checked by an independent verifier. A database of its own: it freezes custody and counts
// every row of the tables an order writes.

const ADMIN_KEY = `admin-${randomBytes(24).toString("hex")}`;
const ORDER_TABLES = [
  "verification_orders",
  "attestations",
  "job_outbox",
  "ledger_transactions",
  "ledger_entries",
  "payment_evidence",
] as const;

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let worker: ReturnType<typeof startVerificationProbesWorker>;
let jsonTarget: TargetServer;
let x402Target: Awaited<ReturnType<typeof startX402Target>>;
let mcpTarget: Awaited<ReturnType<typeof startMcpTarget>>;

const revenue = async () => (await platformAccount("platform_revenue", "USDC")).balance_micros;

async function order(key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return api("POST", "/api/verification/orders", { key, body, headers });
}

/** Polls the order (as its buyer) until the probe has settled it. */
async function settled(key: string, orderId: string) {
  for (let i = 0; i < 200; i++) {
    const res = await api("GET", `/api/verification/orders/${orderId}`, { key });
    if (res.body.status === "completed" || res.body.status === "not_run") return res.body;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`order ${orderId} did not settle`);
}

beforeAll(async () => {
  ownDb = await useOwnDatabase("verif");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ adminApiKey: ADMIN_KEY });
  service = await startService({ worker: false });
  worker = startVerificationProbesWorker();
  await worker.waitUntilReady();
  jsonTarget = await startJsonTarget(200, { success: true, output: { score: 7 } });
  x402Target = await startX402Target();
  mcpTarget = await startMcpTarget();
});

afterAll(async () => {
  await worker?.close();
  await getQueue("verification-probes")
    .obliterate({ force: true })
    .catch(() => {});
  for (const t of [jsonTarget, x402Target, mcpTarget]) await t?.close();
  await closeSafeFetch();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

describe("GET /api/verification (the surface)", () => {
  it("lists every field the spec names, with live counts and the safety facts", async () => {
    const res = await api("GET", "/api/verification");
    expect(res.status).toBe(200);
    const counts = await rowCounts(["verification_orders", "attestations", "monitoring_subscriptions"]);
    expect(res.body).toMatchObject({
      schema: "agentmarket.verification-service.surface.v1",
      pricing: { price_usdc: 5, platform_fee_rate: 0.03 },
      supported_protocols: ["http-json", "x402", "mcp"],
      max_achievable_verdict: { "http-json": "verified", x402: "reachable", mcp: "reachable" },
      verdict_vocabulary: ["verified", "reachable", "failed"],
      prober_version: "agentmarket-prober/1.0.0",
      counts: {
        orders: counts.verification_orders,
        attestations: counts.attestations,
        monitoring_subscriptions: counts.monitoring_subscriptions,
      },
      signing_enabled: true,
      signed_attestations_required: true,
      monitoring_scheduler_enabled: false,
      safety: {
        sells_testing_not_trust: true,
        paid_order_cannot_change_verdict: true,
        spend_on_target_endpoint: false,
        marketplace_trust_state_mutated: false,
        router_ranking_mutated: false,
        listings_mutated: false,
        outbound_fetches_use_safe_fetch: true,
      },
    });
    expect(res.body.pricing.money_note).toMatch(/5 USDC/);
    expect(Object.keys(res.body.routes)).toHaveLength(9);
    const jwks = await api("GET", "/.well-known/jwks.json");
    expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toContain(res.body.signing.active_kid);
  });
});

describe("discovery links the surface", () => {
  it("llms.txt and the service descriptor point at GET /api/verification", async () => {
    const llms = await api("GET", "/llms.txt");
    expect(llms.text).toMatch(/\[Verification service\]\(http:\/\/[^)]+\/api\/verification\)/);
    const descriptor = await api("GET", "/.well-known/agent-marketplace.json");
    expect(descriptor.body.entry_points.verification).toMatch(/\/api\/verification$/);
  });
});

describe("orders: money", () => {
  it("holds 5 USDC at once, captures it all to platform revenue when the probe ran; the target is never paid and the listing never changes", async () => {
    const buyer = await fundedAgent(12);
    const seller = await buildAgent("seller");
    const listing = await buildListing({
      endpointUrl: jsonTarget.url,
      price: 0.5,
      sellerId: seller.agentId,
      verificationStatus: "reachable",
      outputSchema: { type: "object", required: ["score"] },
    });
    const listingState = async () => ({
      listing: await db()("listings").where({ id: listing.id }).first(),
      probes: await db()("health_probes").where({ listing_id: listing.id }),
      changes: await db()("listing_changes").where({ listing_id: listing.id }),
      record: (await api("GET", `/api/capabilities/${listing.id}`)).body,
      ranking: (await api("GET", `/api/execute/match?task=${listing.slug}`, { key: buyer.apiKey })).body,
    });
    const listingBefore = await listingState();
    expect(listingBefore.ranking.candidates.map((c: { listing_id: string }) => c.listing_id)).toContain(
      listing.id,
    );
    const sellerBefore = await balances(seller.agentId, "USDC");
    const revenueBefore = await revenue();
    const callsBefore = jsonTarget.received.length;

    const res = await order(buyer.apiKey, {
      target: jsonTarget.url,
      protocol: "http-json",
      listing_id: listing.id,
    });
    expect(res.status).toBe(202);
    expect(res.headers.get("location")).toBe(res.body.status_url);
    expect(res.body).toMatchObject({
      protocol: "http-json",
      listing_id: listing.id,
      payment: { price_usdc: "5.000000" },
    });
    const done = await settled(buyer.apiKey, res.body.order_id);
    expect(done).toMatchObject({
      status: "completed",
      verdict: "verified",
      payment: { state: "captured", charged_usdc: "5.000000", refunded_usdc: "0.000000", target_paid: false },
    });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(7), held: 0n });
    expect((await revenue()) - revenueBefore).toBe(usdc(5));
    // The seller (listing owner) gets nothing; the target got exactly one probe call, unpaid.
    expect(await balances(seller.agentId, "USDC")).toEqual(sellerBefore);
    const calls = jsonTarget.received.slice(callsBefore);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.headers["payment-signature"]).toBeUndefined();
    expect(calls[0]!.headers.authorization).toBeUndefined();
    // A paid order changes no listing field: verification status, trust, ranking inputs, anything.
    expect(await listingState()).toEqual(listingBefore);
    const evidence = await db()("payment_evidence")
      .where({ subject_type: "verification_order", subject_id: res.body.order_id })
      .orderBy("created_at");
    expect(evidence.map((e) => e.state).sort()).toEqual(["authorization", "capture", "execution", "outcome"]);
    // Written with their ledger movements: each names the transaction whose statement wrote it.
    const posted = await db()("ledger_transactions")
      .whereIn("idempotency_key", [
        `verification:hold:${res.body.order_id}`,
        `verification:capture:${res.body.order_id}`,
      ])
      .select("kind", "id");
    const idOf = (kind: string) => posted.find((t) => t.kind === kind)?.id;
    const refOf = (state: string) => evidence.find((e) => e.state === state)?.source_ref;
    expect(refOf("authorization")).toBe(idOf("hold"));
    expect(refOf("capture")).toBe(idOf("capture"));
    expect(idOf("capture")).toBeDefined();
  });

  it("a failed probe (nothing listens) is charged exactly like any other: the test was delivered", async () => {
    const buyer = await fundedAgent(5);
    const gone = await startJsonTarget(200, {});
    const url = gone.url;
    await gone.close();
    const res = await order(buyer.apiKey, { target: url, protocol: "http-json" });
    expect(res.status).toBe(202);
    const done = await settled(buyer.apiKey, res.body.order_id);
    expect(done).toMatchObject({ status: "completed", verdict: "failed", payment: { state: "captured" } });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 0n, held: 0n });
  });

  it("a probe that could not run through our fault is released in full, and a late probe cannot capture it", async () => {
    const buyer = await fundedAgent(5);
    const slow = await startGatedSeller();
    try {
      const res = await order(buyer.apiKey, { target: slow.url, protocol: "http-json" });
      expect(res.status).toBe(202);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 0n, held: usdc(5) });
      // What the worker does when a job's retries are spent.
      expect(await abandonOrder(res.body.order_id, "probe_not_completed: test")).toEqual({
        status: "not_run",
      });
      slow.release();
      const done = await settled(buyer.apiKey, res.body.order_id);
      expect(done).toMatchObject({
        status: "not_run",
        verdict: null,
        attestation_id: null,
        payment: { state: "released", charged_usdc: "0.000000", refunded_usdc: "5.000000" },
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(5), held: 0n });
      expect(await db()("attestations").where({ order_id: res.body.order_id })).toHaveLength(0);
    } finally {
      slow.release();
      await slow.close();
    }
  });

  it("housekeeping releases an order whose job was lost (unsettled for an hour); fresh ones are left alone", async () => {
    const buyer = await fundedAgent(10);
    const slow = await startGatedSeller();
    try {
      const lost = await order(buyer.apiKey, { target: slow.url, protocol: "http-json" });
      const fresh = await order(buyer.apiKey, { target: slow.url, protocol: "http-json" });
      // Both probes are in flight (running) before one is made to look an hour old.
      for (let i = 0; i < 200; i++) {
        const rows = await db()("verification_orders").whereIn("id", [
          lost.body.order_id,
          fresh.body.order_id,
        ]);
        if (rows.every((r) => r.status === "running")) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      await db()("verification_orders")
        .where({ id: lost.body.order_id })
        .update({ updated_at: db().raw("now() - interval '61 minutes'") });
      expect(await abandonStaleOrders()).toBe(1);
      const lostView = await api("GET", `/api/verification/orders/${lost.body.order_id}`, {
        key: buyer.apiKey,
      });
      expect(lostView.body).toMatchObject({ status: "not_run", payment: { state: "released" } });
      slow.release();
      expect((await settled(buyer.apiKey, fresh.body.order_id)).payment.state).toBe("captured");
      await new Promise((r) => setTimeout(r, 300));
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(5), held: 0n });
    } finally {
      slow.release();
      await slow.close();
    }
  });

  it("short funds: 402 PAYMENT_REQUIRED saying what to do, and nothing is written", async () => {
    const buyer = await fundedAgent(4.99);
    const before = await rowCounts(ORDER_TABLES);
    const res = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    expect(res.status).toBe(402);
    expect(errorCode(res)).toBe("PAYMENT_REQUIRED");
    expect(res.body.error.details).toMatchObject({ required_usdc: "5.000000" });
    expect(res.body.error.details.what_to_do.length).toBeGreaterThan(0);
    expect(await rowCounts(ORDER_TABLES)).toEqual(before);
  });

  it("the gate: with custody frozen every paid verification route answers 503 before any hold", async () => {
    const buyer = await fundedAgent(20);
    const first = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    await settled(buyer.apiKey, first.body.order_id);
    const frozen = await api("POST", "/api/admin/custody/freeze", {
      key: ADMIN_KEY,
      body: { reason: "drill" },
    });
    expect(frozen.status).toBe(200);
    try {
      const before = await rowCounts([...ORDER_TABLES, "monitoring_subscriptions"]);
      const calls = [
        order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" }),
        api("POST", `/api/verification/orders/${first.body.order_id}/rerun`, { key: buyer.apiKey, body: {} }),
        api("POST", `/api/verification/orders/${first.body.order_id}/monitoring`, {
          key: buyer.apiKey,
          body: { interval: 3600 },
        }),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status).toBe(503);
        expect(errorCode(res)).toBe("TEMPORARILY_UNAVAILABLE");
        expect(res.body.error.details.reason).toBe("platform_custody_frozen");
      }
      expect(await rowCounts([...ORDER_TABLES, "monitoring_subscriptions"])).toEqual(before);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(15), held: 0n });
      // Free reads keep working.
      expect((await api("GET", "/api/verification")).status).toBe(200);
    } finally {
      await api("POST", "/api/admin/custody/unfreeze", { key: ADMIN_KEY, body: { reason: "drill over" } });
    }
  });

  it("a key whose per-call limit is under 5 USDC is refused with 429 before any charge", async () => {
    const buyer = await fundedAgent(10);
    const limited = await api("POST", "/api/keys", {
      key: buyer.apiKey,
      body: { name: "small", limits: { per_call_usdc: 1 } },
    });
    expect(limited.status).toBe(201);
    const before = await rowCounts(ORDER_TABLES);
    const res = await order(limited.body.api_key, { target: jsonTarget.url, protocol: "http-json" });
    expect(res.status).toBe(429);
    expect(errorCode(res)).toBe("WALLET_LIMIT_EXCEEDED");
    expect(res.body.error.details).toMatchObject({ limit: "per_call", requested_usdc: "5.000000" });
    expect(await rowCounts(ORDER_TABLES)).toEqual(before);
  });

  it("bad input is a 400 envelope with nothing written: protocol, private target, credentials in the URL", async () => {
    const buyer = await fundedAgent(10);
    const before = await rowCounts(ORDER_TABLES);
    const bodies = [
      { target: jsonTarget.url, protocol: "grpc" },
      { target: "http://10.1.2.3/internal", protocol: "http-json" },
      { target: "ftp://example.com/x", protocol: "http-json" },
      { target: "http://user:pw@127.0.0.1:9/x", protocol: "http-json" },
      { target: "not a url", protocol: "mcp" },
      { target: jsonTarget.url, protocol: "mcp", extra: true },
    ];
    for (const body of bodies) {
      const res = await order(buyer.apiKey, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    }
    const unknownListing = await order(buyer.apiKey, {
      target: jsonTarget.url,
      protocol: "http-json",
      listing_id: "00000000-0000-4000-8000-000000000000",
    });
    expect(unknownListing.status).toBe(404);
    expect(errorCode(unknownListing)).toBe("LISTING_NOT_FOUND");
    expect(await rowCounts(ORDER_TABLES)).toEqual(before);
    expect(
      (await api("POST", "/api/verification/orders", { body: { target: jsonTarget.url, protocol: "mcp" } }))
        .status,
    ).toBe(401);
  });
});

describe("orders: idempotency, rerun, protocols", () => {
  it("the same Idempotency-Key replays the order (one hold); a different request under it is 422", async () => {
    const buyer = await fundedAgent(10);
    const key = `verify-${randomBytes(4).toString("hex")}`;
    const body = { target: jsonTarget.url, protocol: "http-json" };
    const first = await order(buyer.apiKey, body, { "x-idempotency-key": key });
    const again = await order(buyer.apiKey, body, { "x-idempotency-key": key });
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.order_id).toBe(first.body.order_id);
    await settled(buyer.apiKey, first.body.order_id);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(5), held: 0n });
    const other = await order(buyer.apiKey, { ...body, protocol: "mcp" }, { "x-idempotency-key": key });
    expect(other.status).toBe(422);
    expect(errorCode(other)).toBe("IDEMPOTENCY_KEY_REUSED");
  });

  it("rerun: pays again, a new order and attestation; the old attestation is kept and still verifies", async () => {
    const buyer = await fundedAgent(10);
    const first = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    const firstDone = await settled(buyer.apiKey, first.body.order_id);
    const rerun = await api("POST", `/api/verification/orders/${first.body.order_id}/rerun`, {
      key: buyer.apiKey,
      body: {},
    });
    expect(rerun.status).toBe(202);
    expect(rerun.body).toMatchObject({
      rerun_of: first.body.order_id,
      target: jsonTarget.url,
      protocol: "http-json",
    });
    const rerunDone = await settled(buyer.apiKey, rerun.body.order_id);
    expect(rerunDone.attestation_id).not.toBe(firstDone.attestation_id);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 0n, held: 0n });
    const old = await api("GET", `/api/verification/attestations/${firstDone.attestation_id}`);
    expect(old.status).toBe(200);
    const verified = await api("POST", "/api/verification/attestations/verify", {
      body: { jws: old.body.jws },
    });
    expect(verified.body).toMatchObject({ valid: true, attestation_id: firstDone.attestation_id });
  });

  it("x402: reachable from the official resource server's challenge, which is never paid", async () => {
    const buyer = await fundedAgent(5);
    const res = await order(buyer.apiKey, { target: x402Target.url, protocol: "x402" });
    const done = await settled(buyer.apiKey, res.body.order_id);
    expect(done).toMatchObject({ status: "completed", verdict: "reachable", payment: { state: "captured" } });
    expect(x402Target.facilitatorCalls()).toBe(0);
  });

  it("mcp: reachable after initialize + tools/list with the official client; no tool called", async () => {
    const buyer = await fundedAgent(5);
    const res = await order(buyer.apiKey, { target: mcpTarget.url, protocol: "mcp" });
    const done = await settled(buyer.apiKey, res.body.order_id);
    expect(done).toMatchObject({ status: "completed", verdict: "reachable" });
    expect(done.checks.find((c: { name: string }) => c.name === "tools_list").observation.tool_count).toBe(2);
    expect(mcpTarget.toolCalls()).toBe(0);
  });
});

describe("who may read what (BOLA)", () => {
  it("an order is its buyer's or the admin's: anyone else gets the same 404 as a missing id", async () => {
    const buyer = await fundedAgent(5);
    const stranger = await fundedAgent(10);
    const res = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    const id = res.body.order_id;
    await settled(buyer.apiKey, id);
    const before = await balances(stranger.agentId, "USDC");
    const attempts = [
      api("GET", `/api/verification/orders/${id}`, { key: stranger.apiKey }),
      api("POST", `/api/verification/orders/${id}/rerun`, { key: stranger.apiKey, body: {} }),
      api("POST", `/api/verification/orders/${id}/monitoring`, {
        key: stranger.apiKey,
        body: { interval: 3600 },
      }),
      api("GET", "/api/verification/orders/00000000-0000-4000-8000-000000000000", { key: stranger.apiKey }),
    ];
    for (const r of await Promise.all(attempts)) {
      expect(r.status).toBe(404);
      expect(errorCode(r)).toBe("NOT_FOUND");
    }
    expect(await balances(stranger.agentId, "USDC")).toEqual(before);
    expect((await api("GET", `/api/verification/orders/${id}`)).status).toBe(401);
    expect(
      (await api("GET", `/api/verification/orders/${id}`, { key: "not-the-admin-key-at-all-000000000" }))
        .status,
    ).toBe(401);
    const admin = await api("GET", `/api/verification/orders/${id}`, { key: ADMIN_KEY });
    expect(admin.status).toBe(200);
    expect(admin.body.target).toBe(jsonTarget.url);
  });
});

describe("attestations: public, redacted, independently verifiable", () => {
  it("anyone reads the attestation without the target's path or query; plain jose verifies it against our JWKS", async () => {
    const buyer = await fundedAgent(5);
    const res = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    const done = await settled(buyer.apiKey, res.body.order_id);
    const pub = await api("GET", `/api/verification/attestations/${done.attestation_id}`);
    expect(pub.status).toBe(200);
    expect(pub.text).not.toContain("secret-query");
    expect(pub.text).not.toContain("/api/answer");
    expect(pub.body.attestation).toMatchObject({
      order_id: res.body.order_id,
      protocol: "http-json",
      verdict: "verified",
      prober_version: "agentmarket-prober/1.0.0",
      target: { scheme: "http", host: new URL(jsonTarget.url).host },
    });
    // The independent verifier: only jose, our public JWKS URL and the JWS.
    const jwks = createRemoteJWKSet(new URL(`${service.baseUrl}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await compactVerify(pub.body.jws, jwks, { algorithms: ["EdDSA"] });
    expect(protectedHeader).toMatchObject({ alg: "EdDSA", kid: pub.body.kid });
    expect(new TextDecoder().decode(payload)).toBe(canonicalize(pub.body.attestation));
  });

  it("the verify route: valid, tampered, malformed, not_found, unknown_key and unsupported_algorithm", async () => {
    const buyer = await fundedAgent(5);
    const res = await order(buyer.apiKey, { target: jsonTarget.url, protocol: "http-json" });
    const done = await settled(buyer.apiKey, res.body.order_id);
    const pub = (await api("GET", `/api/verification/attestations/${done.attestation_id}`)).body;
    const verify = async (body: unknown) =>
      (await api("POST", "/api/verification/attestations/verify", { body })).body;
    expect(await verify({ jws: pub.jws })).toMatchObject({
      valid: true,
      reason: null,
      kid: pub.kid,
      verdict: "verified",
    });
    expect(await verify({ attestation: pub.attestation })).toMatchObject({ valid: true });
    expect(await verify({ attestation: { ...pub.attestation, verdict: "failed" } })).toMatchObject({
      valid: false,
      reason: "tampered",
    });
    const [h, p, s] = pub.jws.split(".");
    const forged = JSON.parse(Buffer.from(p, "base64url").toString());
    forged.checks = [];
    const forgedJws = `${h}.${Buffer.from(canonicalize(forged)!).toString("base64url")}.${s}`;
    expect(await verify({ jws: forgedJws })).toMatchObject({ valid: false, reason: "bad_signature" });
    expect(await verify({ jws: "garbage" })).toMatchObject({ valid: false, reason: "malformed" });
    expect(
      await verify({ attestation: { attestation_id: "00000000-0000-4000-8000-000000000000" } }),
    ).toMatchObject({
      valid: false,
      reason: "not_found",
    });
    const header = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
    expect(await verify({ jws: `${header({ alg: "EdDSA", kid: "nobody" })}.${p}.${s}` })).toMatchObject({
      reason: "unknown_key",
    });
    expect(await verify({ jws: `${header({ alg: "HS256", kid: pub.kid })}.${p}.${s}` })).toMatchObject({
      reason: "unsupported_algorithm",
    });
    const bad = await api("POST", "/api/verification/attestations/verify", {
      body: { jws: pub.jws, attestation: {} },
    });
    expect(bad.status).toBe(400);
    expect((await api("GET", "/api/verification/attestations/nope")).status).toBe(404);
  });
});
