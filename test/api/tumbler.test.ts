import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { getConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { accountFor, balances } from "../../shared/money/ledger/ledger.js";
import { faucetKey, joinTumbler } from "../../shared/sandbox/tumbler.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { checkPlatformSignature, type Jwks } from "../helpers/seller-verify.js";
import { startService, type TestService } from "../helpers/service.js";

// The sandbox (docs/x402.md "Sandbox (tumbler)") on the shared test database, with a real executions worker
// and real loopback sellers. This process configures no settlement rail, so the paid-execution gate is
// closed throughout: the sandbox must work anyway. Assertions read only this file's own agents, listings
// and ledger transactions (other files share the platform accounts).

let service: TestService;
let okSeller: TestSeller;
let brokenSeller: TestSeller;
let seller: TestAgent;

const TEN = 10_000_000n;
const taskName = () => `sandbox-${randomBytes(4).toString("hex")}`;

beforeAll(async () => {
  service = await startService();
  okSeller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { echoed: call.body.input } }),
  );
  brokenSeller = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
  seller = await buildAgent("seller");
});

afterAll(async () => {
  await okSeller?.close();
  await brokenSeller?.close();
  await service?.stop();
});

/** A listing whose seller opted in to the sandbox (tumbler_enabled), answering to its own task alias. */
async function sandboxListing(
  overrides: Partial<Parameters<typeof buildListing>[0]> = {},
  enabled = true,
): Promise<ListingRow> {
  const listing = await buildListing({
    endpointUrl: okSeller.url,
    price: 0.5,
    sellerId: seller.agentId,
    ...overrides,
  });
  if (enabled) await db()("listings").where({ id: listing.id }).update({ tumbler_enabled: true });
  return { ...listing, tumbler_enabled: enabled };
}

async function joinedBuyer(): Promise<TestAgent> {
  const buyer = await buildAgent();
  const res = await api("POST", "/api/tumbler/join", { key: buyer.apiKey });
  expect(res.status).toBe(200);
  return buyer;
}

async function quote(buyer: TestAgent, task: string) {
  const res = await api("GET", `/api/tumbler/execute/match?task=${task}`, { key: buyer.apiKey });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** Every ledger transaction of an invocation or a faucet grant: each must be in exactly one currency. */
async function currenciesPerTransaction(transactionIds: string[]): Promise<Map<string, Set<string>>> {
  const rows = await db()("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .whereIn("e.transaction_id", transactionIds)
    .select("e.transaction_id", "a.currency", "e.amount_micros");
  const per = new Map<string, Set<string>>();
  const sums = new Map<string, bigint>();
  for (const r of rows) {
    per.set(r.transaction_id, (per.get(r.transaction_id) ?? new Set()).add(r.currency));
    sums.set(r.transaction_id, (sums.get(r.transaction_id) ?? 0n) + BigInt(r.amount_micros));
  }
  for (const [id, sum] of sums) expect(sum, `transaction ${id} sums to zero`).toBe(0n);
  return per;
}

describe("POST /api/tumbler/join (faucet)", () => {
  it("credits up to the daily amount once; a second join the same day credits nothing and says when", async () => {
    const buyer = await buildAgent();
    const first = await api("POST", "/api/tumbler/join", { key: buyer.apiKey });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      simulated: true,
      currency: "tUSDC",
      credited: true,
      credited_tusdc: "10.000000",
      balance: { available_tusdc: "10.000000", held_tusdc: "0.000000" },
      faucet: { target_tusdc: "10.000000", period: "utc_day", topped_up_today: true },
    });
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    expect(first.body.faucet.next_top_up_at).toBe(midnight.toISOString());

    const second = await api("POST", "/api/tumbler/join", { key: buyer.apiKey });
    expect(second.body).toMatchObject({
      credited: false,
      credited_tusdc: "0.000000",
      balance: { available_tusdc: "10.000000" },
      faucet: { topped_up_today: true, ledger_transaction_id: first.body.faucet.ledger_transaction_id },
    });
    expect(second.body.faucet.next_top_up_at).toBe(midnight.toISOString());
    expect(second.body.message).toMatch(/already topped up today/);

    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: TEN, held: 0n });
    expect(await balances(buyer.agentId, "USDC")).toEqual({
      available: 0n,
      held: 0n,
      payable: 0n,
      bonds: 0n,
    });
    const grant = await db()("ledger_transactions")
      .where({ id: first.body.faucet.ledger_transaction_id })
      .first();
    expect(grant).toMatchObject({
      kind: "faucet",
      idempotency_key: faucetKey(buyer.agentId, grant.metadata.utc_day),
    });
    const entries = await db()("ledger_entries as e")
      .join("ledger_accounts as a", "a.id", "e.account_id")
      .where({ "e.transaction_id": grant.id })
      .select("a.kind", "a.currency", "a.owner_agent_id", "e.amount_micros");
    expect(entries.map((e) => [e.kind, e.currency, e.amount_micros]).sort()).toEqual([
      ["agent_available", "tUSDC", "10000000"],
      ["sandbox_faucet", "tUSDC", "-10000000"],
    ]);
    const evidence = await db()("payment_evidence").where({
      subject_type: "tumbler_faucet",
      subject_id: grant.id,
    });
    expect(evidence).toHaveLength(1);
    expect(evidence[0]).toMatchObject({ state: "deposit", source: "tumbler_faucet", currency: "tUSDC" });
    expect(evidence[0].details.simulated).toBe(true);
  });

  it("10 parallel joins credit once", async () => {
    const buyer = await buildAgent();
    // The account exists beforehand, so its first creation does not serialize the joins by itself.
    await accountFor(buyer.agentId, "agent_available", "tUSDC");
    const results = await Promise.all(
      Array.from({ length: 10 }, () => api("POST", "/api/tumbler/join", { key: buyer.apiKey })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(results.filter((r) => r.body.credited)).toHaveLength(1);
    expect(new Set(results.map((r) => r.body.faucet.ledger_transaction_id)).size).toBe(1);
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: TEN });
    const grants = await db()("ledger_transactions")
      .where({ kind: "faucet" })
      .andWhereLike("idempotency_key", `tumbler:faucet:${buyer.agentId}:%`);
    expect(grants).toHaveLength(1);
  });

  it("on a later UTC day tops up only what was spent, and credits nothing at or above the target", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    await sandboxListing({ tags: [task], price: 1.25 });
    const q = await quote(buyer, task);
    expect(
      (
        await api("POST", "/api/tumbler/execute", {
          key: buyer.apiKey,
          body: { quote_id: q.quote_id, input: {} },
        })
      ).status,
    ).toBe(200);
    expect((await balances(buyer.agentId, "tUSDC")).available).toBe(8_750_000n);

    const tomorrow = new Date(Date.now() + 24 * 3600 * 1000);
    const next = await joinTumbler(buyer.agentId, tomorrow);
    expect(next).toMatchObject({
      credited: true,
      credited_tusdc: "1.250000",
      balance: { available_tusdc: "10.000000" },
    });
    const dayAfter = new Date(Date.now() + 48 * 3600 * 1000);
    const full = await joinTumbler(buyer.agentId, dayAfter);
    expect(full).toMatchObject({
      credited: false,
      faucet: { topped_up_today: false, ledger_transaction_id: null },
    });
    expect(full.message).toMatch(/today's top-up is still unused/);
    expect((await balances(buyer.agentId, "tUSDC")).available).toBe(TEN);
  });

  it("needs a key", async () => {
    expect((await api("POST", "/api/tumbler/join")).status).toBe(401);
  });
});

describe("GET /api/tumbler/execute/match", () => {
  it("offers only tumbler_enabled, active, approved listings and quotes the top one in tUSDC", async () => {
    const buyer = await buildAgent();
    const task = taskName();
    // The better-ranked listing (verified, cheaper) has not opted in: the sandbox must not offer it.
    const notOptedIn = await sandboxListing(
      { tags: [task], price: 0.1, verificationStatus: "verified" },
      false,
    );
    const retired = await sandboxListing({ tags: [task], price: 0.1, status: "retired" });
    const unapproved = await sandboxListing({ tags: [task], price: 0.1 });
    await db()("listings").where({ id: unapproved.id }).update({ review_status: "pending" });
    const optedIn = await sandboxListing({ tags: [task], price: 0.75 });

    const q = await quote(buyer, task);
    expect(q).toMatchObject({
      rail: "tumbler",
      currency: "tUSDC",
      simulated: true,
      amount_tusdc: "0.750000",
      task,
      listing: { listing_id: optedIn.id, price_tusdc: "0.750000" },
      other_eligible_listings: 0,
      execute: { method: "POST", url: `${getConfig().publicBaseUrl}/api/tumbler/execute` },
    });
    expect(q.note).toMatch(/really runs/);
    expect(JSON.stringify(q)).not.toMatch(/_usdc"/);
    const ttl = new Date(q.expires_at).getTime() - Date.now();
    expect(ttl).toBeGreaterThan(290_000);
    expect(ttl).toBeLessThanOrEqual(300_000);
    const row = await db()("quotes").where({ id: q.quote_id }).first();
    expect(row).toMatchObject({
      rail: "tumbler",
      currency: "tUSDC",
      amount_micros: "750000",
      agent_id: buyer.agentId,
      used_at: null,
    });
    for (const other of [notOptedIn, retired, unapproved]) expect(q.listing.listing_id).not.toBe(other.id);
  });

  it("a seller opts in at publish time (tumbler_enabled: true) and out again with PATCH", async () => {
    const optingSeller = await buildAgent("seller");
    const buyer = await buildAgent();
    const task = taskName();
    const published = await api("POST", "/api/capabilities", {
      key: optingSeller.apiKey,
      body: {
        name: `Sandbox opt-in ${task}`,
        description: "a listing that opts in to the sandbox",
        category: "testing",
        endpoint_url: okSeller.url,
        pricing_model: "per_call",
        price_per_unit: 0.3,
        input_schema: { type: "object" },
        tags: [task],
        tumbler_enabled: true,
      },
    });
    expect(published.status, JSON.stringify(published.body)).toBe(201);
    expect(published.body.tumbler_enabled).toBe(1);
    expect((await quote(buyer, task)).listing.listing_id).toBe(published.body.id);

    const off = await api("PATCH", `/api/capabilities/${published.body.id}`, {
      key: optingSeller.apiKey,
      body: { tumbler_enabled: false },
    });
    expect(off.status).toBe(200);
    expect(off.body.tumbler_enabled).toBe(0);
    const res = await api("GET", `/api/tumbler/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(res.status).toBe(404);
  });

  it("answers 404 LISTING_NOT_FOUND when no sandbox-enabled listing serves the task", async () => {
    const buyer = await buildAgent();
    const task = taskName();
    await sandboxListing({ tags: [task] }, false);
    const res = await api("GET", `/api/tumbler/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(res.status).toBe(404);
    expect(errorCode(res)).toBe("LISTING_NOT_FOUND");
    expect(res.body.error.details.hint).toMatch(/tumbler_enabled/);
    // The router itself still sees the listing: only the sandbox is restricted.
    const routed = await api("GET", `/api/execute/match?task=${task}`, { key: buyer.apiKey });
    expect(routed.body.excluded.map((e: { reason: string }) => e.reason)).toEqual([
      "paid_execution_unavailable",
    ]);
  });
});

describe("POST /api/tumbler/execute", () => {
  it("runs the real endpoint (signed), captures tUSDC 97/3, and shows tUSDC with simulated: true everywhere", async () => {
    const market = await api("GET", "/market.json");
    expect(market.body.availability.paid_execution).toBe("temporarily_unavailable");

    const buyer = await joinedBuyer();
    const sellerBefore = await balances(seller.agentId, "tUSDC");
    const task = taskName();
    const listing = await sandboxListing({
      tags: [task],
      price: 2,
      inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
    });
    const q = await quote(buyer, task);
    const callsBefore = okSeller.calls.length;
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: { text: "hello sandbox" } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      success: true,
      output: { echoed: { text: "hello sandbox" } },
      simulated: true,
      provider: { listing_id: listing.id, selection_reason: "sandbox_quote_locked_to_listing" },
      cost: {
        amount_tusdc: "2.000000",
        listed_price_tusdc: "2.000000",
        currency: "tUSDC",
        charged: true,
        simulated: true,
      },
    });
    expect(res.body.cost.amount_usdc).toBeUndefined();

    // The seller's endpoint really ran, called by the executions worker with a verifiable signature.
    const call = okSeller.calls.slice(callsBefore).find((c) => c.body?.input?.text === "hello sandbox");
    expect(call).toBeDefined();
    const jwks = (await api("GET", "/.well-known/jwks.json")).body as Jwks;
    expect(checkPlatformSignature(call!.headers, call!.raw, jwks)).toBeNull();

    // Money: buyer −2, seller payable +1.94, platform revenue +0.06 — all tUSDC, nothing in USDC.
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: 8_000_000n, held: 0n });
    const sellerAfter = await balances(seller.agentId, "tUSDC");
    expect(sellerAfter.payable - sellerBefore.payable).toBe(1_940_000n);
    for (const agent of [buyer, seller])
      expect(await balances(agent.agentId, "USDC")).toEqual({
        available: 0n,
        held: 0n,
        payable: 0n,
        bonds: 0n,
      });
    const capture = await db()("ledger_transactions")
      .where({ reference_id: res.body.invocation_id, kind: "capture" })
      .first();
    const captureEntries = await db()("ledger_entries as e")
      .join("ledger_accounts as a", "a.id", "e.account_id")
      .where({ "e.transaction_id": capture.id })
      .select("a.kind", "a.currency", "e.amount_micros");
    expect(captureEntries.map((e) => [e.kind, e.currency, e.amount_micros]).sort()).toEqual([
      ["agent_held", "tUSDC", "-2000000"],
      ["platform_revenue", "tUSDC", "60000"],
      ["seller_payable", "tUSDC", "1940000"],
    ]);
    const txs = await db()("ledger_transactions")
      .where({ reference_id: res.body.invocation_id })
      .select("id", "kind");
    expect(txs.map((t) => t.kind).sort()).toEqual(["capture", "hold"]);
    for (const [, currencies] of await currenciesPerTransaction(txs.map((t) => t.id)))
      expect([...currencies]).toEqual(["tUSDC"]);

    const invocation = await db()("invocations").where({ id: res.body.invocation_id }).first();
    expect(invocation).toMatchObject({
      route: "tumbler",
      currency: "tUSDC",
      hold_micros: "2000000",
      candidate_ids: [listing.id],
    });
    expect(await db()("quotes").where({ id: q.quote_id }).first()).toMatchObject({
      invocation_id: invocation.id,
    });

    // Evidence: every row simulated, in tUSDC, with sources that name the rail.
    const evidence = await db()("payment_evidence")
      .where({ invocation_id: invocation.id })
      .orderBy("created_at");
    expect(Object.fromEntries(evidence.map((e) => [e.state, e.source]))).toEqual({
      authorization: "tumbler_ledger_hold",
      execution: "provider_response",
      capture: "tumbler_ledger_capture",
      outcome: "invocation",
    });
    for (const e of evidence) {
      expect(e.currency, e.state).toBe("tUSDC");
      expect(e.details.simulated, e.state).toBe(true);
    }
    expect(evidence.find((e) => e.state === "authorization").details.quote_id).toBe(q.quote_id);

    const status = await api("GET", `/api/execute/status/${invocation.id}`, { key: buyer.apiKey });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      route: "tumbler",
      simulated: true,
      cost: { currency: "tUSDC", amount_tusdc: "2.000000" },
      payment: {
        currency: "tUSDC",
        simulated: true,
        state: "captured",
        held_tusdc: "2.000000",
        charged_tusdc: "2.000000",
        seller_share_tusdc: "1.940000",
        platform_fee_tusdc: "0.060000",
        onchain_settlement_null_reason: "sandbox_units_are_simulated_and_never_settle_on_chain",
      },
      settlement: { state: "captured", rail: "tumbler_ledger", simulated: true },
    });
    expect(status.body.payment.evidence.capture.amount_tusdc).toBe("2.000000");
    const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, { key: buyer.apiKey });
    expect(receipt.status).toBe(200);
    expect(receipt.body).toMatchObject({
      amount_tusdc: "2.000000",
      currency: "tUSDC",
      simulated: true,
      split: { seller_share_tusdc: "1.940000", platform_fee_tusdc: "0.060000", platform_fee_rate: 0.03 },
    });
    for (const body of [res.body, status.body, receipt.body])
      expect(JSON.stringify(body)).not.toMatch(/_usdc"/);

    // A sandbox call is a call, never paid proof.
    const record = await api("GET", `/api/capabilities/${listing.id}`);
    expect(record.body).toMatchObject({
      success_count: 1,
      paid_success_count: 0,
      last_paid_success_at: null,
    });
  });

  it("releases the hold when the seller fails: nothing charged, simulated refund evidence, no receipt", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    await sandboxListing({ tags: [task], endpointUrl: brokenSeller.url, price: 3, safeToRetry: false });
    const q = await quote(buyer, task);
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(res.status).toBe(502);
    expect(errorCode(res)).toBe("PROVIDER_FAILED");
    const invocationId = res.body.error.details.invocation_id;
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: TEN, held: 0n });
    const kinds = await db()("ledger_transactions").where({ reference_id: invocationId }).select("kind");
    expect(kinds.map((k) => k.kind).sort()).toEqual(["hold", "release"]);
    const refund = await db()("payment_evidence")
      .where({ invocation_id: invocationId, state: "refund" })
      .first();
    expect(refund).toMatchObject({
      source: "tumbler_ledger_release",
      currency: "tUSDC",
      amount_micros: "3000000",
    });
    expect(refund.details.simulated).toBe(true);
    const status = await api("GET", `/api/execute/status/${invocationId}`, { key: buyer.apiKey });
    expect(status.body).toMatchObject({
      status: "failed",
      receipt_id: null,
      simulated: true,
      payment: {
        currency: "tUSDC",
        state: "released",
        charged_tusdc: "0.000000",
        refunded_tusdc: "3.000000",
      },
      settlement: { state: "released", rail: "tumbler_ledger" },
    });
  });

  it("a quote pays once: a second execute is 409 quote_already_used naming the invocation; parallel executes run once", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    await sandboxListing({ tags: [task], price: 1 });
    const q = await quote(buyer, task);
    const first = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(first.status).toBe(200);
    const again = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(again.status).toBe(409);
    expect(errorCode(again)).toBe("QUOTE_NOT_USABLE");
    expect(again.body.error.details).toMatchObject({
      reason: "quote_already_used",
      invocation_id: first.body.invocation_id,
    });

    const q2 = await quote(buyer, task);
    const racing = await Promise.all(
      Array.from({ length: 5 }, () =>
        api("POST", "/api/tumbler/execute", {
          key: buyer.apiKey,
          body: { quote_id: q2.quote_id, input: {} },
        }),
      ),
    );
    expect(racing.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409]);
    expect(await db()("invocations").where({ agent_id: buyer.agentId })).toHaveLength(2);
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: 8_000_000n, held: 0n });
  });

  it("an expired quote is 409 quote_expired; another agent's or an unknown quote is 404", async () => {
    const buyer = await joinedBuyer();
    const other = await joinedBuyer();
    const task = taskName();
    await sandboxListing({ tags: [task], price: 1 });
    const expired = await quote(buyer, task);
    await db()("quotes")
      .where({ id: expired.quote_id })
      .update({ expires_at: db().raw("now() - interval '1 second'") });
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: expired.quote_id, input: {} },
    });
    expect(res.status).toBe(409);
    expect(res.body.error.details).toMatchObject({
      reason: "quote_expired",
      new_quote: `/api/tumbler/execute/match?task=${task}`,
    });

    const mine = await quote(buyer, task);
    for (const id of [mine.quote_id, randomUUID(), "not-a-uuid"]) {
      const r = await api("POST", "/api/tumbler/execute", {
        key: other.apiKey,
        body: { quote_id: id, input: {} },
      });
      expect(r.status, id).toBe(404);
      expect(errorCode(r)).toBe("NOT_FOUND");
    }
    // Nothing was written for either agent, and the quote is still usable by its owner.
    expect(await db()("invocations").whereIn("agent_id", [buyer.agentId, other.agentId])).toHaveLength(0);
    expect(
      (
        await api("POST", "/api/tumbler/execute", {
          key: buyer.apiKey,
          body: { quote_id: mine.quote_id, input: {} },
        })
      ).status,
    ).toBe(200);
  });

  it("validates input against the listing's schema (400) and refuses a short tUSDC balance (402), keeping the quote", async () => {
    const task = taskName();
    await sandboxListing({
      tags: [task],
      price: 12,
      inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
    });
    const buyer = await joinedBuyer();
    const q = await quote(buyer, task);
    const bad = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: { text: 1 } },
    });
    expect(bad.status).toBe(400);
    expect(errorCode(bad)).toBe("SCHEMA_VALIDATION_FAILED");

    const short = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: { text: "x" } },
    });
    expect(short.status).toBe(402);
    expect(short.body.error.details).toMatchObject({
      currency: "tUSDC",
      simulated: true,
      required_tusdc: "12.000000",
      available_tusdc: "10.000000",
    });
    expect(short.body.error.details.what_to_do.join(" ")).toMatch(/tumbler\/join/);
    expect(await db()("quotes").where({ id: q.quote_id }).first()).toMatchObject({
      used_at: null,
      invocation_id: null,
    });
    expect(await db()("invocations").where({ agent_id: buyer.agentId })).toHaveLength(0);
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: TEN, held: 0n });
  });

  it("charges the quoted amount even when the seller changes the price after the quote", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    const listing = await sandboxListing({ tags: [task], price: 1 });
    const q = await quote(buyer, task);
    await db()("listings").where({ id: listing.id }).update({ price_micros: "5000000" });
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(res.status).toBe(200);
    expect(res.body.cost).toMatchObject({ amount_tusdc: "1.000000", listed_price_tusdc: "1.000000" });
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: 9_000_000n, held: 0n });
  });

  it("a listing that opted out after the quote is 422 LISTING_NOT_INVOCABLE", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    const listing = await sandboxListing({ tags: [task], price: 1 });
    const q = await quote(buyer, task);
    await db()("listings").where({ id: listing.id }).update({ tumbler_enabled: false });
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details.reason).toBe("tumbler_disabled");
  });
});

describe("key scopes in the sandbox (the seller's endpoint really receives the input)", () => {
  it("match skips listings outside the key's seller scope (403 when none is left); execute re-checks the executing key", async () => {
    const buyer = await joinedBuyer();
    const task = taskName();
    await sandboxListing({ tags: [task], price: 0.2 });
    const scoped = await api("POST", "/api/keys", {
      key: buyer.apiKey,
      body: { scopes: { seller_allowlist: ["platform"] } },
    });
    expect(scoped.status).toBe(201);
    const blocked = await api("GET", `/api/tumbler/execute/match?task=${task}`, { key: scoped.body.api_key });
    expect(blocked.status).toBe(403);
    expect(errorCode(blocked)).toBe("POLICY_BLOCKED");

    const q = await quote(buyer, task);
    const res = await api("POST", "/api/tumbler/execute", {
      key: scoped.body.api_key,
      body: { quote_id: q.quote_id, input: {} },
    });
    expect(res.status).toBe(403);
    expect(res.body.error.details.reason).toBe("seller_not_in_key_allowlist");
    expect(await db()("quotes").where({ id: q.quote_id }).first()).toMatchObject({ used_at: null });
  });
});

describe("tUSDC and USDC stay apart", () => {
  it("GET /api/wallet shows tUSDC apart from a zero USDC balance", async () => {
    const buyer = await joinedBuyer();
    const wallet = await api("GET", "/api/wallet", { key: buyer.apiKey });
    expect(wallet.status).toBe(200);
    expect(wallet.body.balances.USDC.available_usdc).toBe("0.000000");
    expect(wallet.body.balances.tUSDC).toMatchObject({ available_usdc: "10.000000" });
    expect(wallet.body.balances.tUSDC.note).toMatch(/simulated/);
  });

  it("no USDC account ever receives tUSDC: the faucet exists in tUSDC only and holds refuse a USDC balance", async () => {
    await expect(
      db()("ledger_accounts").insert({ kind: "sandbox_faucet", currency: "USDC", allow_negative: true }),
    ).rejects.toMatchObject({ constraint: "ledger_accounts_sandbox_faucet_currency_check" });
    const faucets = await db()("ledger_accounts").where({ kind: "sandbox_faucet" });
    expect(faucets.map((a) => a.currency)).toEqual(["tUSDC"]);
  });
});

describe("POST /api/tumbler/transition", () => {
  it("without create_wallet explains the handoff only", async () => {
    const buyer = await joinedBuyer();
    const res = await api("POST", "/api/tumbler/transition", { key: buyer.apiKey, body: {} });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      sandbox: { currency: "tUSDC", simulated: true, available_tusdc: "10.000000" },
      production: { read_first: "/market.json", paid_execution: "temporarily_unavailable" },
      wallet: null,
      wallet_null_reason: "create_wallet_not_requested",
    });
    const text = res.body.what_changes.join(" ");
    for (const needle of ["never converts", "/api/wallet/purchase", "/market.json", "same API key"])
      expect(`${res.body.sandbox.what_happens_to_it} ${text}`).toContain(needle);
    expect((await api("POST", "/api/tumbler/transition", { key: buyer.apiKey })).body.wallet).toBeNull();
  });

  it("with create_wallet shows a self-custody key once and never stores it", async () => {
    const buyer = await joinedBuyer();
    const res = await api("POST", "/api/tumbler/transition", {
      key: buyer.apiKey,
      body: { create_wallet: true },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body.wallet).toMatchObject({ custody: "self", linked: true });
    const privateKey: string = res.body.wallet.private_key;
    expect(privateKey).toMatch(/^0x[0-9a-f]{64}$/);

    const again = await api("POST", "/api/tumbler/transition", {
      key: buyer.apiKey,
      body: { create_wallet: true },
    });
    expect(again.body.wallet.private_key).not.toBe(privateKey);
    expect(again.body.wallet.linked).toBe(false);

    // No row of any table holds the key, in any case or without its 0x.
    const hex = privateKey.slice(2);
    const tables = await db().select("tablename").from("pg_tables").where({ schemaname: "public" });
    for (const { tablename } of tables) {
      const hit = await db().raw(`select 1 from "${tablename}" t where t::text ilike ? limit 1`, [
        `%${hex}%`,
      ]);
      expect(hit.rows, tablename).toHaveLength(0);
    }
  });
});
