import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalChain, startLocalChain } from "../../shared/chain/local-chain.js";
import { getConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { utcDayEnd } from "../../shared/identity/spend-limits.js";
import { freePort } from "../../shared/infra/free-port.js";
import { parseUsdc } from "../../shared/kernel/money.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent, MONEY_TABLES, rowCounts } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startProcess, waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The price ceiling and the spend limits of a key on a live paid gate (a local chain, as in
// paid-execute.test.ts): enforced before any charge, the daily cap reserved atomically with the hold —
// also across two API processes — and a released hold giving its reservation back. A database of its
// own: it counts every row of the money tables.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let okSeller: TestSeller;
let brokenSeller: TestSeller;
let sellerAgent: TestAgent;

const usdc = (n: number) => parseUsdc(n, "/test");
const taskName = () => `limits-${randomBytes(4).toString("hex")}`;

const funded = (amount: number) => fundedAgent(amount);

/** A key of the buyer with the given settings, made by its registration key. */
async function keyWith(
  buyer: TestAgent,
  body: Record<string, unknown>,
): Promise<{ id: string; key: string }> {
  const res = await api("POST", "/api/keys", { key: buyer.apiKey, body });
  expect(res.status).toBe(201);
  return { id: res.body.key.key_id, key: res.body.api_key };
}

async function today(buyer: TestAgent, keyId: string) {
  const list = await api("GET", "/api/keys", { key: buyer.apiKey });
  return list.body.keys.find((k: { key_id: string }) => k.key_id === keyId).today;
}

const moneyRowCounts = () => rowCounts(MONEY_TABLES);

const paid = (price: number, more: Partial<Parameters<typeof buildListing>[0]> = {}) =>
  buildListing({ endpointUrl: okSeller.url, price, sellerId: sellerAgent.agentId, ...more });

beforeAll(async () => {
  ownDb = await useOwnDatabase("limits");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  okSeller = await startSeller((_call, res) => json(res, 200, { success: true, output: { ok: true } }));
  brokenSeller = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await okSeller?.close();
  await brokenSeller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

describe("price ceiling (a scope)", () => {
  it("match excludes pricier listings, execute and invoke refuse them with 403; free work is never blocked", async () => {
    const task = taskName();
    const cheap = await paid(0.05, { tags: [task] });
    const dear = await paid(0.5, { tags: [task], verificationStatus: "verified" });
    const free = await paid(0, { tags: [task] });
    const buyer = await funded(5);
    const { key } = await keyWith(buyer, { scopes: { max_price_usdc: 0.1 } });

    const match = await api("GET", `/api/execute/match?task=${task}`, { key });
    expect(match.body.candidates.map((c: { listing_id: string }) => c.listing_id).sort()).toEqual(
      [cheap.id, free.id].sort(),
    );
    expect(match.body.excluded).toEqual([
      expect.objectContaining({ listing_id: dear.id, reason: "over_key_price_ceiling" }),
    ]);

    const before = await moneyRowCounts();
    const invoke = await api("POST", `/api/invoke/${dear.id}`, { key, body: { input: {} } });
    expect([invoke.status, errorCode(invoke)]).toEqual([403, "POLICY_BLOCKED"]);
    expect(invoke.body.error.details).toMatchObject({
      scope: "max_price_usdc",
      reason: "over_key_price_ceiling",
    });
    const onlyDear = taskName();
    await paid(0.5, { tags: [onlyDear] });
    const execute = await api("POST", "/api/execute", { key, body: { task: onlyDear, input: {} } });
    expect([execute.status, errorCode(execute)]).toEqual([403, "POLICY_BLOCKED"]);
    expect(execute.body.error.details.scopes).toEqual(["max_price_usdc"]);
    expect(await moneyRowCounts()).toEqual(before);

    // A ceiling of zero still lets the key call free listings.
    const { key: zero } = await keyWith(buyer, { scopes: { max_price_usdc: 0 } });
    expect((await api("POST", `/api/invoke/${free.id}`, { key: zero, body: { input: {} } })).status).toBe(
      200,
    );
    expect((await api("POST", `/api/invoke/${cheap.id}`, { key: zero, body: { input: {} } })).status).toBe(
      403,
    );
  });
});

describe("per-call limit", () => {
  it("a call over the limit → 429 WALLET_LIMIT_EXCEEDED before any hold; within it runs", async () => {
    const listing = await paid(0.3);
    const buyer = await funded(5);
    const { key } = await keyWith(buyer, { limits: { per_call_usdc: 0.2 } });
    const before = await moneyRowCounts();
    const res = await api("POST", `/api/invoke/${listing.id}`, { key, body: { input: {} } });
    expect([res.status, errorCode(res)]).toEqual([429, "WALLET_LIMIT_EXCEEDED"]);
    expect(res.body.error.details).toMatchObject({
      limit: "per_call",
      limit_usdc: "0.200000",
      requested_usdc: "0.300000",
    });
    expect(res.body.error.buyer_action).toBe("raise_limit_or_request_supervisor_approval");
    expect(await moneyRowCounts()).toEqual(before);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(5), held: 0n });
    const within = await paid(0.2);
    expect((await api("POST", `/api/invoke/${within.id}`, { key, body: { input: {} } })).status).toBe(200);
  });

  it("execute keeps no fallback dearer than the limit, so the hold stays within it", async () => {
    const task = taskName();
    const top = await paid(0.1, { tags: [task], verificationStatus: "verified" });
    const dearFallback = await paid(0.4, { tags: [task] });
    const buyer = await funded(5);
    const { key } = await keyWith(buyer, { limits: { per_call_usdc: 0.2 } });
    const res = await api("POST", "/api/execute", { key, body: { task, input: {} } });
    expect(res.status).toBe(200);
    expect(res.body.provider.listing_id).toBe(top.id);
    const ids = res.body.selection.candidates.map((c: { listing_id: string }) => c.listing_id);
    expect(ids).toEqual([top.id]);
    expect(ids).not.toContain(dearFallback.id);
    const status = await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key });
    expect(status.body.payment.held_usdc).toBe("0.100000");
  });
});

describe("daily cap", () => {
  it("20 parallel calls through two API processes against a cap that admits 5: exactly 5 run", async () => {
    const port = await freePort();
    const config = getConfig();
    const other = startProcess("dist/api/main.js", [], {
      LOG_LEVEL: "warn",
      PORT: String(port),
      DATABASE_URL: ownDb.url,
      CHAIN_RPC_URL: chain.rpcUrl,
      CHAIN_ID: String(chain.chainId),
      USDC_ADDRESS: chain.tokenAddress,
      PLATFORM_SIGNER_KEY: config.platformSignerKey!,
    });
    const otherBase = `http://127.0.0.1:${port}`;
    try {
      await waitFor(
        "the second API",
        async () => (await api("GET", "/api/stats", { baseUrl: otherBase })).status === 200,
      );
      const listing = await paid(0.1, { concurrencyLimit: 30, rateLimit: 1000 });
      const buyer = await funded(10);
      const { id, key } = await keyWith(buyer, { limits: { daily_cap_usdc: 0.5 } });
      const calls = seller();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          api("POST", `/api/invoke/${listing.id}`, {
            key,
            body: { input: { i } },
            ...(i % 2 ? { baseUrl: otherBase } : {}),
          }),
        ),
      );
      const codes = results.map((r) => r.status);
      // What each call got, said when the count is off. An admitted call answers 200, or 202 while it
      // still runs when the machine is slow enough that the invoke's wait for its result runs out.
      const answers = JSON.stringify(results.map((r) => [r.status, r.body?.error?.code ?? null]));
      expect(
        codes.filter((c) => c === 200 || c === 202),
        answers,
      ).toHaveLength(5);
      expect(codes.filter((c) => c === 429)).toHaveLength(15);
      // Each process alone would have admitted 5 of its 10: the cap held across them, not per process.
      const refused = results.find((r) => r.status === 429)!;
      expect(refused.body.error.code).toBe("WALLET_LIMIT_EXCEEDED");
      const day = new Date().toISOString().slice(0, 10);
      expect(refused.body.error.details).toMatchObject({
        limit: "daily_cap",
        limit_usdc: "0.500000",
        requested_usdc: "0.100000",
        day,
        resets_at: utcDayEnd(day),
      });
      await waitFor(
        "the admitted calls to finish",
        async () => (await db()("invocations").where({ api_key_id: id, status: "succeeded" })).length === 5,
      );
      expect(calls()).toBe(5);
      const invocations = await db()("invocations").where({ api_key_id: id });
      expect(invocations).toHaveLength(5);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(9.5), held: 0n });
      expect(await today(buyer, id)).toMatchObject({
        day,
        reserved_usdc: "0.000000",
        spent_usdc: "0.500000",
        remaining_usdc: "0.000000",
      });
    } finally {
      other.child.kill("SIGTERM");
      expect(await other.exited).toBe(0);
    }
  });

  it("a failed (released) call gives its reservation back in the release's transaction", async () => {
    const broken = await paid(0.2, { endpointUrl: brokenSeller.url, safeToRetry: false });
    const ok = await paid(0.2);
    const buyer = await funded(5);
    const { id, key } = await keyWith(buyer, { limits: { daily_cap_usdc: 0.2 } });
    const failed = await api("POST", `/api/invoke/${broken.id}`, { key, body: { input: {} } });
    expect(failed.status).toBe(502);
    expect(await today(buyer, id)).toMatchObject({ reserved_usdc: "0.000000", spent_usdc: "0.000000" });
    const res = await api("POST", `/api/invoke/${ok.id}`, { key, body: { input: {} } });
    expect(res.status).toBe(200);
    expect(await today(buyer, id)).toMatchObject({ spent_usdc: "0.200000", remaining_usdc: "0.000000" });
    // Refused by the reservation inside the hold's transaction: that transaction writes nothing.
    const before = await moneyRowCounts();
    const over = await api("POST", `/api/invoke/${ok.id}`, { key, body: { input: {} } });
    expect([over.status, errorCode(over)]).toEqual([429, "WALLET_LIMIT_EXCEEDED"]);
    expect(over.body.error.details).toMatchObject({ spent_usdc: "0.200000", reserved_usdc: "0.000000" });
    expect(await moneyRowCounts()).toEqual(before);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(4.8), held: 0n });
  });

  it("a fallback cheaper than the hold counts only what it charged", async () => {
    const task = taskName();
    await paid(0.3, { tags: [task], endpointUrl: brokenSeller.url, verificationStatus: "verified" });
    await paid(0.05, { tags: [task] });
    const buyer = await funded(5);
    const { id, key } = await keyWith(buyer, { limits: { daily_cap_usdc: 1 } });
    const res = await api("POST", "/api/execute", { key, body: { task, input: {} } });
    expect(res.status).toBe(200);
    expect(res.body.cost.amount_usdc).toBe("0.050000");
    expect(await today(buyer, id)).toMatchObject({
      reserved_usdc: "0.000000",
      spent_usdc: "0.050000",
      remaining_usdc: "0.950000",
    });
  });

  it("a single call above the whole cap is refused without touching the day's row", async () => {
    const listing = await paid(0.6);
    const buyer = await funded(5);
    const { key } = await keyWith(buyer, { limits: { daily_cap_usdc: 0.5 } });
    const before = await moneyRowCounts();
    const res = await api("POST", `/api/invoke/${listing.id}`, { key, body: { input: {} } });
    expect([res.status, errorCode(res)]).toEqual([429, "WALLET_LIMIT_EXCEEDED"]);
    expect(res.body.error.details).toMatchObject({ limit: "daily_cap", remaining_usdc: "0.500000" });
    expect(await moneyRowCounts()).toEqual(before);
  });

  it("free calls are never limited by price: a zero cap and zero per-call limit still run them", async () => {
    const free = await paid(0);
    const buyer = await funded(1);
    const { key } = await keyWith(buyer, { limits: { daily_cap_usdc: 0, per_call_usdc: 0 } });
    expect((await api("POST", `/api/invoke/${free.id}`, { key, body: { input: {} } })).status).toBe(200);
    expect((await api("POST", "/api/execute", { key, body: { task: "echo", input: {} } })).status).toBe(200);
  });
});

describe("the UTC day boundary", () => {
  it("yesterday's spend does not count today; a full day refuses until its resets_at", async () => {
    const listing = await paid(0.2);
    const buyer = await funded(5);
    const { id, key } = await keyWith(buyer, { limits: { daily_cap_usdc: 0.2 } });
    // Yesterday (UTC, by the database's clock) the key spent its whole cap.
    await db().raw(
      `insert into api_key_spend_days (api_key_id, day, reserved_micros, spent_micros)
       values (?, (now() at time zone 'UTC')::date - 1, 0, 200000)`,
      [id],
    );
    const res = await api("POST", `/api/invoke/${listing.id}`, { key, body: { input: {} } });
    expect(res.status).toBe(200);
    const day = await today(buyer, id);
    expect(day).toMatchObject({ spent_usdc: "0.200000", remaining_usdc: "0.000000" });
    // The invocation's insert stamped it with the day its reservation was made on: today's, not the
    // row of yesterday (SPEND_DAY_STAMP), and the capture settled that day.
    const stamped = await db()("invocations")
      .where({ id: res.body.invocation_id })
      .first(db().raw("spend_day::text as spend_day"));
    expect(stamped).toEqual({ spend_day: day.day });
    const over = await api("POST", `/api/invoke/${listing.id}`, { key, body: { input: {} } });
    expect([over.status, errorCode(over)]).toEqual([429, "WALLET_LIMIT_EXCEEDED"]);
    expect(over.body.error.details).toMatchObject({ day: day.day, resets_at: utcDayEnd(day.day) });
    expect(Date.parse(over.body.error.details.resets_at)).toBeGreaterThan(Date.now());
    const rows = await db()("api_key_spend_days")
      .where({ api_key_id: id })
      .select(db().raw("day::text as day"));
    expect(rows).toHaveLength(2);
  });

  it("utcDayEnd is the next midnight UTC, across month and year ends", () => {
    expect(utcDayEnd("2026-11-22")).toBe("2026-11-23T00:00:00.000Z");
    expect(utcDayEnd("2026-02-28")).toBe("2026-03-01T00:00:00.000Z");
    expect(utcDayEnd("2026-12-31")).toBe("2027-01-01T00:00:00.000Z");
  });
});

/** Counts okSeller calls from now on. */
function seller(): () => number {
  const start = okSeller.calls.length;
  return () => okSeller.calls.length - start;
}
