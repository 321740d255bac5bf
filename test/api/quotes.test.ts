import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The quote operation (docs/api.md "Quotes"): POST /api/quotes binds a listing's price for one agent until
// it expires; execute and invoke with quote_id hold and charge that price even if the listing's price has
// changed since; a quote pays one call; expired, used, foreign or mismatched quotes are refused clearly.
// Own database with a live paid gate (local chain).

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("quotes");
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

const paidListing = (price = 0.1) =>
  buildListing({
    endpointUrl: seller.url,
    price,
    sellerId: sellerAgent.agentId,
    inputSchema: { type: "object", required: ["q"], properties: { q: { type: "string" } } },
  });

describe("POST /api/quotes", () => {
  it("binds the price with the split, network, payment options and the constraints checked", async () => {
    const buyer = await fundedAgent(5);
    const listing = await paidListing(0.1);
    const res = await api("POST", "/api/quotes", {
      key: buyer.apiKey,
      body: { listing_id: listing.id, input: { q: "x" }, max_cost: 0.2 },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/api/quotes/${res.body.quote_id}`);
    expect(res.body).toMatchObject({
      rail: "ledger",
      listing_id: listing.id,
      task: listing.slug,
      price_usdc: "0.100000",
      platform_fee_usdc: "0.003000",
      seller_share_usdc: "0.097000",
      currency: "USDC",
      network: "eip155:31337",
      status: "open",
      constraints: { input_valid: true, max_cost_usdc: "0.200000", within_max_cost: true },
    });
    expect(res.body.payment_options.map((o: { method: string }) => o.method)).toEqual([
      "ledger",
      "x402",
      "mpp",
    ]);
    expect(new Date(res.body.expires_at).getTime()).toBeGreaterThan(Date.now());
    const read = await api("GET", `/api/quotes/${res.body.quote_id}`, { key: buyer.apiKey });
    expect(read.body).toMatchObject({ quote_id: res.body.quote_id, status: "open" });
  });

  it("refuses what a direct invoke would: bad input 400, over max_cost 422, unknown listing 404, own listing 403", async () => {
    const buyer = await fundedAgent(5);
    const listing = await paidListing(0.1);
    const quote = (body: Record<string, unknown>, key = buyer.apiKey) =>
      api("POST", "/api/quotes", { key, body });
    expect(errorCode(await quote({ listing_id: listing.id, input: { q: 1 } }))).toBe(
      "SCHEMA_VALIDATION_FAILED",
    );
    expect(errorCode(await quote({ listing_id: listing.id, max_cost: 0.05 }))).toBe("LISTING_NOT_INVOCABLE");
    expect(errorCode(await quote({ listing_id: "00000000-0000-4000-8000-000000000000" }))).toBe(
      "LISTING_NOT_FOUND",
    );
    expect(errorCode(await quote({ listing_id: listing.id }, sellerAgent.apiKey))).toBe(
      "SELF_DEALING_FORBIDDEN",
    );
  });
});

describe("paying a quote", () => {
  it("invoke charges the quoted price even after the listing's price rises; the quote pays once", async () => {
    const buyer = await fundedAgent(5);
    const listing = await paidListing(0.1);
    const quote = (await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: listing.id } }))
      .body;
    await db()("listings").where({ id: listing.id }).update({ price_micros: "250000" });
    const run = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: { q: "quoted" }, quote_id: quote.quote_id },
    });
    expect(run.status, run.text).toBe(200);
    const receipt = await api("GET", `/api/commerce/receipts/${run.body.receipt_id}`, { key: buyer.apiKey });
    expect(receipt.body.amount_usdc).toBe("0.100000");
    expect((await balances(buyer.agentId, "USDC")).available).toBe(4_900_000n);
    const again = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: { q: "again" }, quote_id: quote.quote_id },
    });
    expect(again.status).toBe(409);
    expect(again.body.error.details).toMatchObject({
      reason: "quote_already_used",
      invocation_id: run.body.invocation_id,
    });
    expect((await api("GET", `/api/quotes/${quote.quote_id}`, { key: buyer.apiKey })).body.status).toBe(
      "used",
    );
  });

  it("execute with quote_id runs the quoted listing for its task; a retry with the same key replays", async () => {
    const buyer = await fundedAgent(5);
    const listing = await paidListing(0.05);
    const quote = (await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: listing.id } }))
      .body;
    const body = {
      task: listing.slug,
      input: { q: "t" },
      quote_id: quote.quote_id,
      idempotency_key: `k-${quote.quote_id}`,
    };
    const first = await api("POST", "/api/execute", { key: buyer.apiKey, body });
    expect(first.status, first.text).toBe(200);
    const replay = await api("POST", "/api/execute", { key: buyer.apiKey, body });
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body.invocation_id).toBe(first.body.invocation_id);
    expect((await balances(buyer.agentId, "USDC")).available).toBe(4_950_000n);
    const fresh = (await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: listing.id } }))
      .body;
    const wrongTask = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "echo", input: {}, quote_id: fresh.quote_id },
    });
    expect(wrongTask.status).toBe(409);
    expect(wrongTask.body.error.details.reason).toBe("quote_task_mismatch");
  });

  it("refuses an expired quote (409), another agent's quote (404) and a quote for another listing (409)", async () => {
    const buyer = await fundedAgent(5);
    const other = await fundedAgent(5);
    const listing = await paidListing(0.05);
    const elsewhere = await paidListing(0.05);
    const mint = async () =>
      (await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: listing.id } })).body
        .quote_id as string;
    const expired = await mint();
    await db()("quotes")
      .where({ id: expired })
      .update({ expires_at: db().raw("now() - interval '1 second'") });
    const invoke = (id: string, quoteId: string, key = buyer.apiKey) =>
      api("POST", `/api/invoke/${id}`, { key, body: { input: { q: "x" }, quote_id: quoteId } });
    const late = await invoke(listing.id, expired);
    expect(late.status).toBe(409);
    expect(late.body.error.details.reason).toBe("quote_expired");
    const mine = await mint();
    expect(errorCode(await invoke(listing.id, mine, other.apiKey))).toBe("NOT_FOUND");
    const mismatch = await invoke(elsewhere.id, mine);
    expect(mismatch.status).toBe(409);
    expect(mismatch.body.error.details.reason).toBe("quote_listing_mismatch");
    expect(errorCode(await invoke(listing.id, "not-a-quote"))).toBe("NOT_FOUND");
    // Nothing was held or charged by any refusal.
    expect((await balances(buyer.agentId, "USDC")).available).toBe(5_000_000n);
  });

  it("one quote model: an x402 quote reads back through GET /api/quotes/{id}", async () => {
    const buyer = await buildAgent();
    const listing = await paidListing(0.05);
    const match = await api("GET", `/api/x402/execute/match?task=${listing.slug}`);
    const read = await api("GET", `/api/quotes/${match.body.quote_id}`, { key: buyer.apiKey });
    expect(read.body).toMatchObject({
      rail: "x402",
      listing_id: listing.id,
      price_usdc: "0.050000",
      status: "open",
    });
  });
});
