import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { builtFullTransactor } from "../../shared/db/transactor.js";
import { paidGateProvedByHold, readGate, resetGateCache } from "../../shared/money/gate/availability.js";
import { balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import {
  groupCommitRows,
  groupCommitSplits,
  groupCommitStatements,
} from "../../shared/observability/metrics.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent, MONEY_TABLES, rowCounts, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { checkPlatformSignature } from "../helpers/seller-verify.js";
import { startService, type TestService } from "../helpers/service.js";

// Paid router calls on a live gate: a local chain answers the RPC check, a platform signer is set, and
// custody is open. This file has a database of its own: it freezes custody (platform-wide state) and
// counts every row of the money tables.

const ADMIN_KEY = `admin-${randomBytes(24).toString("hex")}`;
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let okSeller: TestSeller;
let brokenSeller: TestSeller;
let sellerAgent: TestAgent;

const taskName = () => `paid-${randomBytes(4).toString("hex")}`;
const funded = (amount: number) => fundedAgent(amount);
const moneyRowCounts = () => rowCounts(MONEY_TABLES);

async function revenue(): Promise<bigint> {
  return (await platformAccount("platform_revenue", "USDC")).balance_micros;
}

type Buyer = Awaited<ReturnType<typeof funded>>;

/**
 * Runs `body` on a paid listing (0.01 USDC, wide limits) whose seller answers after 30 ms, so that calls
 * sent together, or a little apart, are in flight together (the paid group commit, paid-group.ts). Each
 * buyer makes one call first: a post in one flight declines an account on first use (each buyer's held
 * account, the seller's payable), and a group that meets one is run again alone.
 */
async function withSlowPaidListing(
  buyers: Buyer[],
  body: (listingId: string) => Promise<void>,
): Promise<void> {
  const slow = await startSeller(async (call, res) => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    json(res, 200, { success: true, output: { got: call.body?.input } });
  });
  try {
    const listing = await buildListing({
      endpointUrl: slow.url,
      price: 0.01,
      sellerId: sellerAgent.agentId,
      concurrencyLimit: 100,
      rateLimit: 10_000,
    });
    for (const buyer of buyers) {
      const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
      expect(res.status).toBe(200);
    }
    await body(listing.id);
  } finally {
    await slow.close();
  }
}

/** `count` calls, the i-th sent 2 ms × i after the first, answered in order. */
function sentApart<T>(count: number, send: (i: number) => Promise<T>): Promise<T[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, 2 * i));
      return send(i);
    }),
  );
}

/** A group commit counter's value for the paid group. */
async function paidWritesCounted(metric: typeof groupCommitRows): Promise<number> {
  return (await metric.get()).values.find((v) => v.labels.group === "paid_writes")?.value ?? 0;
}

beforeAll(async () => {
  ownDb = await useOwnDatabase("paid");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ adminApiKey: ADMIN_KEY });
  service = await startService();
  okSeller = await startSeller((call, res) => json(res, 200, { success: true, output: { got: call.body } }));
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

describe("the gate with a live rail", () => {
  it("market.json reports paid execution enabled and custody active", async () => {
    const res = await api("GET", "/market.json");
    expect(res.body.availability).toMatchObject({
      status: "available",
      paid_execution: "enabled",
      reason: null,
      custody: { status: "active", authoritative: true, authority_read_ok: true },
    });
    expect(res.body.marketplace_info.funding).toEqual({ status: "available", reason: null });
  });

  it("a paid listing's pricing names the configured chain's CAIP-2 network, not Base's", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.1,
      sellerId: sellerAgent.agentId,
    });
    const record = await api("GET", `/api/capabilities/${listing.id}`);
    expect(record.body.invocation_contract.pricing.network).toBe(`eip155:${getConfig().chainId}`);
    expect(getConfig().chainId).toBe(31337);
  });

  it("names the reason when the RPC is down, on the wrong chain, or there is no signer", async () => {
    const config = getConfig();
    const cases: [Partial<typeof config>, string][] = [
      [{ chainRpcUrl: "http://127.0.0.1:9" }, "settlement_rpc_unreachable"],
      [{ chainId: 8453 }, "settlement_chain_mismatch"],
      [{ platformSignerKey: undefined }, "settlement_signer_not_configured"],
      [{ chainRpcUrl: undefined }, "platform_custody_frozen"],
    ];
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.1,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    try {
      for (const [change, reason] of cases) {
        overrideConfig({ ...config, ...change });
        resetGateCache();
        const market = await api("GET", "/market.json");
        expect(market.body.availability, reason).toMatchObject({
          paid_execution: "temporarily_unavailable",
          reason,
        });
        const before = await moneyRowCounts();
        const res = await api("POST", `/api/invoke/${listing.id}`, {
          key: buyer.apiKey,
          body: { input: {} },
        });
        expect(res.status, reason).toBe(503);
        expect(res.body.error.details).toMatchObject({ status: "temporarily_unavailable", reason });
        expect(await moneyRowCounts()).toEqual(before);
      }
    } finally {
      overrideConfig(config);
      resetGateCache();
    }
    expect((await api("GET", "/market.json")).body.availability.paid_execution).toBe("enabled");
  });
});

describe("paid direct invoke", () => {
  it("signs attempt 1 while the hold is written: the seller gets the buyer's input as sent, and it verifies", async () => {
    // Signed before the hold's answer, the request carries the input as the buyer wrote it; signed after,
    // it carried the input read back from PostgreSQL's jsonb, whose keys come out shortest first.
    const seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { ok: 1 } }));
    try {
      const listing = await buildListing({
        endpointUrl: seller.url,
        price: 0.1,
        sellerId: sellerAgent.agentId,
      });
      const buyer = await funded(1);
      const res = await api("POST", `/api/invoke/${listing.id}`, {
        key: buyer.apiKey,
        body: { input: { longest_key: 1, mid: [1, 2], z: "é" } },
      });
      expect(res.status).toBe(200);
      expect(seller.calls).toHaveLength(1);
      const [call] = seller.calls;
      expect(call!.raw.toString("utf8")).toContain('"input":{"longest_key":1,"mid":[1,2],"z":"é"}');
      const jwks = (await api("GET", "/.well-known/jwks.json")).body;
      expect(checkPlatformSignature(call!.headers, call!.raw, jwks)).toBeNull();
      expect(call!.headers["webhook-id"]).toBe(`${res.body.invocation_id}.1`);
    } finally {
      await seller.close();
    }
  });

  it("holds, calls, captures 97/3 and shows the split on the receipt and in the balances", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.1,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const sellerBefore = await balances(sellerAgent.agentId, "USDC");
    const revenueBefore = await revenue();

    const res = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: { q: 1 } },
    });
    expect(res.status).toBe(200);
    expect(res.body.cost).toMatchObject({ amount_usdc: "0.100000", charged: true });

    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.9), held: 0n });
    const sellerAfter = await balances(sellerAgent.agentId, "USDC");
    expect(sellerAfter.payable - sellerBefore.payable).toBe(97_000n);
    expect((await revenue()) - revenueBefore).toBe(3_000n);

    const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, { key: buyer.apiKey });
    expect(receipt.body).toMatchObject({
      amount_usdc: "0.100000",
      split: { seller_share_usdc: "0.097000", platform_fee_usdc: "0.003000", platform_fee_rate: 0.03 },
      settlement: { state: "captured", rail: "ledger" },
      payment: {
        state: "captured",
        charged_usdc: "0.100000",
        held_usdc: "0.100000",
        refunded_usdc: "0.000000",
      },
    });

    const status = await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key: buyer.apiKey });
    const evidence = status.body.payment.evidence;
    for (const state of ["authorization", "execution", "capture", "outcome"]) {
      expect(evidence[state], state).not.toBeNull();
      expect(evidence[`${state}_null_reason`], state).toBeNull();
    }
    expect(evidence.refund).toBeNull();
    expect(evidence.refund_null_reason).toBe("captured_not_refunded");
    expect(evidence.authorization.source).toBe("ledger_hold");
    expect(evidence.capture).toMatchObject({ source: "ledger_capture", amount_usdc: "0.100000" });
    expect(evidence.execution.source).toBe("provider_response");

    // Written with the ledger movements they record (one statement each), naming their transactions.
    const rows = await db()("payment_evidence")
      .where({ invocation_id: res.body.invocation_id })
      .select("state");
    expect(rows.map((r) => r.state).sort()).toEqual(["authorization", "capture", "execution", "outcome"]);
    const ledgerId = async (key: string) =>
      (await db()("ledger_transactions").where({ idempotency_key: key }).first("id")).id;
    expect(evidence.authorization.source_ref).toBe(await ledgerId(`ledger:hold:${res.body.invocation_id}`));
    expect(evidence.capture.source_ref).toBe(await ledgerId(`ledger:capture:${res.body.invocation_id}`));
  });

  it("runs a paid call's transactions on prepared statements alone: no knex transactor is built", async () => {
    // docs/benchmarks.md "The twenty-fourth round": knex's transactor was the largest allocation of a
    // paid call (execute or invoke, one path); its hold's and capture's transactions leave it unbuilt
    // (shared/db/transactor.ts).
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.01,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const call = () =>
      api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: { q: 1 } } });
    expect((await call()).status).toBe(200); // a first call may post in two steps (an account's first use)
    // Every transaction this process opens from now on, with where it was opened (the outbox sweeper's
    // and other background work are told apart by that).
    const opened: { trx: object; from: string }[] = [];
    const knex = db();
    const original = knex.transaction.bind(knex);
    const spy = vi.spyOn(knex, "transaction").mockImplementation(((container: unknown, config: unknown) => {
      const from = new Error().stack ?? "";
      if (typeof container !== "function") return original(container as never, config as never);
      const recorded = (trx: object) => {
        opened.push({ trx, from });
        return (container as (t: object) => unknown)(trx);
      };
      return original(recorded as never, config as never);
    }) as never);
    try {
      for (let i = 0; i < 3; i += 1) {
        const res = await call();
        expect(res.status).toBe(200);
        expect(res.body.cost).toMatchObject({ charged: true });
      }
    } finally {
      spy.mockRestore();
    }
    const paidPath = opened.filter((o) => /shared\/routing\/(submission|run-invocation)\.ts/.test(o.from));
    expect(paidPath.length).toBe(6); // each call's hold and its capture
    expect(paidPath.filter((o) => builtFullTransactor(o.trx))).toEqual([]);
  });

  it("a call refused for its balance takes nothing from the listing's rate limit", async () => {
    // One call a minute: had the refused request counted in the window, the next would be RATE_LIMITED.
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.5,
      sellerId: sellerAgent.agentId,
      rateLimit: 1,
      concurrencyLimit: 1,
    });
    const poor = await funded(0.2);
    const refused = await api("POST", `/api/invoke/${listing.id}`, { key: poor.apiKey, body: { input: {} } });
    expect(refused.status).toBe(402);
    const rich = await funded(1);
    const res = await api("POST", `/api/invoke/${listing.id}`, {
      key: rich.apiKey,
      body: { input: { q: 2 } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.cost).toMatchObject({ charged: true });
  });

  it("answers 402 with what to do when the balance is short, and writes nothing", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.5,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(0.2);
    const before = await moneyRowCounts();
    const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(res.status).toBe(402);
    expect(errorCode(res)).toBe("PAYMENT_REQUIRED");
    expect(res.body.error.details).toMatchObject({ required_usdc: "0.500000", available_usdc: "0.200000" });
    expect(res.body.error.details.what_to_do.join(" ")).toMatch(/wallet\/purchase/);
    expect(await moneyRowCounts()).toEqual(before);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.2), held: 0n });
  });

  it("releases the hold when the provider fails: nothing charged, refund evidence, no receipt", async () => {
    const listing = await buildListing({
      endpointUrl: brokenSeller.url,
      price: 0.25,
      sellerId: sellerAgent.agentId,
      safeToRetry: false,
    });
    const buyer = await funded(1);
    const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(res.status).toBe(502);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });
    const status = await api("GET", `/api/execute/status/${res.body.error.details.invocation_id}`, {
      key: buyer.apiKey,
    });
    expect(status.body).toMatchObject({
      status: "failed",
      receipt_id: null,
      settlement: { state: "released", rail: "ledger" },
      payment: {
        state: "released",
        charged_usdc: "0.000000",
        refunded_usdc: "0.250000",
        seller_share_usdc: null,
      },
    });
    expect(status.body.payment.evidence.refund).toMatchObject({
      source: "ledger_release",
      amount_usdc: "0.250000",
    });
    expect(status.body.payment.evidence.capture).toBeNull();
    expect(status.body.payment.evidence.capture_null_reason).toBe("released_not_captured");
  });

  it("runs a paid execute on kept listings after the catalog moved: the moved copy writes nothing, a fresh read serves", async () => {
    // The first execute keeps the task's listings; a listing written since moves the catalog, so the
    // next execute's insert fails its strict guard, its whole flight (the hold and its COMMIT among it)
    // rolls back, and the execute is decided again on a fresh read.
    const t = taskName();
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.001,
      sellerId: sellerAgent.agentId,
      tags: [t],
    });
    const buyer = await funded(1);
    const execute = () => api("POST", "/api/execute", { key: buyer.apiKey, body: { task: t, input: {} } });
    expect((await execute()).status).toBe(200);
    await db()("listings")
      .where({ id: listing.id })
      .update({ name: `${listing.name} renamed` });
    const res = await execute();
    expect(res.status).toBe(200);
    expect(await db()("invocations").where({ task: t }).count({ n: "*" })).toEqual([{ n: "2" }]);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.998), held: 0n });
  });

  it("refuses a price above max_cost before holding anything", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.3,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const before = await moneyRowCounts();
    const res = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: {}, max_cost: 0.1 },
    });
    expect(res.status).toBe(422);
    expect(res.body.error.details.reason).toBe("over_max_cost");
    expect(await moneyRowCounts()).toEqual(before);
  });

  it("N parallel paid calls against a balance that covers 3: exactly 3 run, the rest are 402", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.3,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const results = await Promise.all(
      Array.from({ length: 10 }, () =>
        api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    // An admitted call answers 200, or 202 while it still runs when a loaded machine runs out the
    // invoke's wait for its result (EXECUTE_SYNC_WAIT_MS): its money is counted once it has ended.
    expect(
      statuses.filter((s) => s === 200 || s === 202),
      JSON.stringify(statuses),
    ).toHaveLength(3);
    expect(statuses.filter((s) => s === 402)).toHaveLength(7);
    await waitFor(
      "the admitted calls to end",
      async () => (await balances(buyer.agentId, "USDC")).held === 0n,
    );
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.1), held: 0n });
  });

  it("paid calls sent together hold, and settle, in grouped transactions: each charged once with its own evidence", async () => {
    // Calls sent together are in flight together, and calls sent a little apart meet: a later call's
    // claim arrives while an earlier one's success is written (paid-group.ts).
    const buyers = [await funded(5), await funded(5), await funded(5)];
    await withSlowPaidListing(buyers, async (listingId) => {
      const sellerBefore = (await balances(sellerAgent.agentId, "USDC")).payable;
      const before = [
        await paidWritesCounted(groupCommitStatements),
        await paidWritesCounted(groupCommitRows),
      ];
      const grouped = async () => ({
        statements: (await paidWritesCounted(groupCommitStatements)) - before[0]!,
        rows: (await paidWritesCounted(groupCommitRows)) - before[1]!,
      });
      /** Ledger transactions of both kinds written by one database transaction (one xmin). */
      const mixedTransactions = async () => {
        const { rows } = await db().raw(
          `select count(distinct h.xmin::text)::int as n
             from ledger_transactions h
             join ledger_transactions c on c.xmin = h.xmin and c.kind = 'capture'
             join invocations i on i.id::text = h.reference_id
            where h.kind = 'hold' and i.listing_id = ?`,
          [listingId],
        );
        return rows[0].n as number;
      };
      const calls = [1, 1, 1];
      let sent = 0;
      let counts = await grouped();
      let mixed = 0;
      // Grouping needs writes that overlap; a loaded machine now and then serves a burst one call at a
      // time, so up to five bursts of 24, sent 2 ms apart, are sent until the writes were grouped and a
      // group carried both claims and successes.
      for (let burst = 0; burst < 5; burst++) {
        const answers = await sentApart(24, (i) => {
          calls[i % 3]! += 1;
          return api("POST", `/api/invoke/${listingId}`, {
            key: buyers[i % 3]!.apiKey,
            body: { input: { n: sent + i } },
          });
        });
        for (const [i, res] of answers.entries()) {
          expect(res.status).toBe(200);
          expect(res.body.output).toEqual({ got: { n: sent + i } });
          expect(res.body.cost).toMatchObject({ amount_usdc: "0.010000", charged: true });
          const rows = await db()("payment_evidence")
            .where({ invocation_id: res.body.invocation_id })
            .select("state", "source_ref");
          expect(rows.map((r) => r.state).sort()).toEqual([
            "authorization",
            "capture",
            "execution",
            "outcome",
          ]);
          const ledgerId = async (kind: string) =>
            (
              await db()("ledger_transactions")
                .where({ idempotency_key: `ledger:${kind}:${res.body.invocation_id}` })
                .first("id")
            ).id;
          expect(rows.find((r) => r.state === "authorization")!.source_ref).toBe(await ledgerId("hold"));
          expect(rows.find((r) => r.state === "capture")!.source_ref).toBe(await ledgerId("capture"));
          const receipts = await db()("receipts").where({ invocation_id: res.body.invocation_id });
          expect(receipts.map((r) => r.id)).toEqual([res.body.receipt_id]);
        }
        sent += answers.length;
        counts = await grouped();
        // Every write (a claim and a success a call) went through the group commit: grouped, alone, or
        // both when a group failed and its writes went again alone.
        expect(counts.rows).toBeGreaterThanOrEqual(2 * sent);
        mixed = await mixedTransactions();
        if (counts.statements < 2 * sent && mixed > 0) break;
      }
      // Fewer statements than writes: some were grouped; and some group held and captured together.
      expect(counts.statements).toBeLessThan(2 * sent);
      expect(mixed).toBeGreaterThan(0);
      // Each buyer paid 0.01 a call, once; nothing is left held; the seller got 97 % of every call.
      for (const [i, buyer] of buyers.entries()) {
        expect(await balances(buyer.agentId, "USDC")).toMatchObject({
          available: usdc(5) - BigInt(calls[i]!) * usdc(0.01),
          held: 0n,
        });
      }
      expect((await balances(sellerAgent.agentId, "USDC")).payable - sellerBefore).toBe(
        BigInt(sent) * 9_700n,
      );
    });
  });

  it("a paid group failed by one buyer's short funds sends its writes alone: every other call is charged once", async () => {
    // The short buyer's claims meet the other buyer's claims and successes in the same groups
    // (paid-group.ts), and fail them. Its first call spends all it has.
    const [rich, poor] = [await funded(5), await funded(0.01)];
    await withSlowPaidListing([rich, poor], async (listingId) => {
      const sellerBefore = (await balances(sellerAgent.agentId, "USDC")).payable;
      const splitsBefore = await paidWritesCounted(groupCommitSplits);
      let served = 0;
      for (let burst = 0; burst < 5; burst++) {
        const answers = await sentApart(24, async (i) => {
          const buyer = i % 2 === 0 ? rich : poor;
          return {
            rich: buyer === rich,
            res: await api("POST", `/api/invoke/${listingId}`, { key: buyer.apiKey, body: { input: { i } } }),
          };
        });
        for (const { rich: isRich, res } of answers) {
          if (!isRich) {
            expect(errorCode(res)).toBe("PAYMENT_REQUIRED");
            continue;
          }
          served += 1;
          expect(res.status).toBe(200);
          expect(res.body.cost).toMatchObject({ amount_usdc: "0.010000", charged: true });
          const receipts = await db()("receipts").where({ invocation_id: res.body.invocation_id });
          expect(receipts.map((r) => r.id)).toEqual([res.body.receipt_id]);
          const captures = await db()("ledger_transactions").where({
            idempotency_key: `ledger:capture:${res.body.invocation_id}`,
          });
          expect(captures).toHaveLength(1);
        }
        if ((await paidWritesCounted(groupCommitSplits)) > splitsBefore) break;
      }
      // Some group failed and its writes went alone.
      expect(await paidWritesCounted(groupCommitSplits)).toBeGreaterThan(splitsBefore);
      // The rich buyer's first call and every one served since.
      expect(await balances(rich.agentId, "USDC")).toMatchObject({
        available: usdc(5) - BigInt(1 + served) * usdc(0.01),
        held: 0n,
      });
      expect(await balances(poor.agentId, "USDC")).toMatchObject({ available: 0n, held: 0n });
      expect((await balances(sellerAgent.agentId, "USDC")).payable - sellerBefore).toBe(
        BigInt(served) * 9_700n,
      );
    });
  });

  it("an idempotent replay of a paid call holds and charges once", async () => {
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.2,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const body = { input: { n: 1 }, idempotency_key: `k-${randomBytes(6).toString("hex")}` };
    const first = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body });
    const second = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.body.invocation_id).toBe(first.body.invocation_id);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.8), held: 0n });
  });
});

describe("paid execute with fallback", () => {
  it("charges only the attempt that served, at its own price, and returns the rest of the hold", async () => {
    const task = taskName();
    const dear = await buildListing({
      endpointUrl: brokenSeller.url,
      price: 0.2,
      tags: [task],
      sellerId: sellerAgent.agentId,
      verificationStatus: "verified",
    });
    const other = await buildAgent("seller");
    const cheap = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.05,
      tags: [task],
      sellerId: other.agentId,
    });
    const buyer = await funded(1);
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(res.status).toBe(200);
    expect(res.body.provider.listing_id).toBe(cheap.id);
    expect(res.body.provider.selection_reason).toBe("fallback_after_higher_ranked_candidate_failed");
    expect(res.body.cost.amount_usdc).toBe("0.050000");
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.95), held: 0n });
    expect((await balances(other.agentId, "USDC")).payable).toBe(48_500n);

    const status = await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key: buyer.apiKey });
    expect(status.body.attempts.map((a: { listing_id: string }) => a.listing_id)).toEqual([
      dear.id,
      cheap.id,
    ]);
    expect(status.body.payment).toMatchObject({
      held_usdc: "0.200000",
      charged_usdc: "0.050000",
      refunded_usdc: "0.150000",
      seller_share_usdc: "0.048500",
      platform_fee_usdc: "0.001500",
    });
    const captures = await db()("ledger_transactions").where({
      reference_id: res.body.invocation_id,
      kind: "capture",
    });
    expect(captures).toHaveLength(1);
  });

  it("releases everything when every candidate fails", async () => {
    const task = taskName();
    await buildListing({
      endpointUrl: brokenSeller.url,
      price: 0.1,
      tags: [task],
      sellerId: sellerAgent.agentId,
    });
    await buildListing({
      endpointUrl: brokenSeller.url,
      price: 0.15,
      tags: [task],
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
    expect(res.status).toBe(502);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });
  });
});

describe("custody freeze (admin API)", () => {
  it("is 401 without the admin key and 404 when no admin key is configured", async () => {
    expect((await api("GET", "/api/admin/custody")).status).toBe(401);
    expect((await api("GET", "/api/admin/custody", { key: "wrong" })).status).toBe(401);
    const buyer = await buildAgent();
    expect((await api("GET", "/api/admin/custody", { key: buyer.apiKey })).status).toBe(401);
    const config = getConfig();
    overrideConfig({ ...config, adminApiKey: undefined });
    try {
      expect((await api("GET", "/api/admin/custody", { key: ADMIN_KEY })).status).toBe(404);
    } finally {
      overrideConfig(config);
    }
  });

  it("frozen: every paid route answers 503 with zero rows changed, free routes keep working; unfreeze restores", async () => {
    const task = taskName();
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.1,
      tags: [task],
      sellerId: sellerAgent.agentId,
    });
    const buyer = await funded(1);

    const frozen = await api("POST", "/api/admin/custody/freeze", {
      key: ADMIN_KEY,
      body: { reason: "incident drill" },
    });
    expect(frozen.status).toBe(200);
    expect(frozen.body).toMatchObject({
      custody: { frozen: true, reason: "incident drill" },
      paid_execution: "temporarily_unavailable",
      reason: "platform_custody_frozen",
    });
    expect(frozen.body.audit[0]).toMatchObject({ action: "custody.freeze", data: { changed: true } });

    try {
      const market = await api("GET", "/market.json");
      expect(market.body.availability).toMatchObject({
        status: "read_only",
        paid_execution: "temporarily_unavailable",
        reason: "platform_custody_frozen",
        custody: { status: "frozen" },
      });
      const before = await moneyRowCounts();
      const paidCalls = [
        api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } }),
        api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } }),
        api("POST", "/api/execute", {
          key: buyer.apiKey,
          body: { task, input: {}, idempotency_key: "frozen-1" },
        }),
      ];
      for (const res of await Promise.all(paidCalls)) {
        expect(res.status).toBe(503);
        expect(errorCode(res)).toBe("TEMPORARILY_UNAVAILABLE");
        expect(res.body.error.details.reason).toBe("platform_custody_frozen");
      }
      expect(await moneyRowCounts()).toEqual(before);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });

      const echo = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: "echo", input: { message: "still free" } },
      });
      expect(echo.status).toBe(200);
      expect((await api("GET", "/api/capabilities")).status).toBe(200);
      expect((await api("GET", "/api/health")).status).toBe(200);
    } finally {
      const open = await api("POST", "/api/admin/custody/unfreeze", {
        key: ADMIN_KEY,
        body: { reason: "drill over" },
      });
      expect(open.status).toBe(200);
      expect(open.body.paid_execution).toBe("enabled");
    }
    const again = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } });
    expect(again.status).toBe(200);

    const audit = await db()("audit_events").where({ subject_type: "platform_settings" }).orderBy("id");
    expect(audit.map((a) => a.action).slice(-2)).toEqual(["custody.freeze", "custody.unfreeze"]);
    expect(audit.at(-1).data).toMatchObject({
      reason: "drill over",
      before: { frozen: true },
      after: { frozen: false },
    });
  });

  it("a freeze written by another process binds at once although this one kept an open gate reading", async () => {
    // The gate a hold proves (docs/payments.md): an open custody reading kept for CHAIN_CHECK_CACHE_MS is
    // used without reading the switch again, and the hold's own custody check is what binds a freeze.
    const config = getConfig();
    overrideConfig({ chainCheckCacheMs: 60_000 });
    const task = taskName();
    const paid = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.1,
      tags: [task],
      sellerId: sellerAgent.agentId,
      verificationStatus: "verified", // ranked above the free one while paid execution is open
    });
    const free = await buildListing({ endpointUrl: okSeller.url, price: 0, tags: [task] });
    const buyer = await funded(1);
    // Another process freezes: the row changes, and nothing tells this one.
    const writeFrozen = (frozen: boolean) =>
      db().raw(
        "update platform_settings set value = jsonb_set(value, '{frozen}', ?::jsonb) where key = 'custody'",
        [JSON.stringify(frozen)],
      );
    try {
      resetGateCache();
      expect((await readGate()).enabled).toBe(true); // kept: open, read just now
      await writeFrozen(true);
      expect(await paidGateProvedByHold()).toEqual({ enabled: true, reason: null }); // not read again

      const before = await moneyRowCounts();
      const invoke = await api("POST", `/api/invoke/${paid.id}`, { key: buyer.apiKey, body: { input: {} } });
      expect(invoke.status).toBe(503);
      expect(invoke.body.error.details.reason).toBe("platform_custody_frozen");
      expect(await moneyRowCounts()).toEqual(before);
      // The hold forgot the kept reading: the next read is fresh.
      expect(await paidGateProvedByHold()).toEqual({ enabled: false, reason: "platform_custody_frozen" });

      // An execute ranked on a kept reading is decided again on a fresh one: the free listing serves.
      expect((await readGate()).enabled).toBe(false);
      await writeFrozen(false);
      expect((await readGate()).enabled).toBe(true);
      await writeFrozen(true);
      const execute = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
      expect(execute.status).toBe(200);
      expect(execute.body).toMatchObject({ provider: { listing_id: free.id }, cost: { charged: false } });
      // The paid hold tried first wrote nothing; only the free run's own rows are new.
      const after = await moneyRowCounts();
      expect(after).toEqual({
        ...before,
        invocations: before.invocations! + 1,
        invocation_attempts: before.invocation_attempts! + 1,
        receipts: before.receipts! + 1,
      });
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });

      // A frozen reading is never kept: the unfreeze binds at the next request.
      await writeFrozen(false);
      const open = await api("POST", `/api/invoke/${paid.id}`, { key: buyer.apiKey, body: { input: {} } });
      expect(open.status).toBe(200);
    } finally {
      await writeFrozen(false);
      overrideConfig(config);
      resetGateCache();
    }
  });

  it("a freeze racing paid calls: every call either holds and runs or is refused having written nothing", async () => {
    // Room for all 20 at once: the race is with the freeze, not with the listing's concurrency limit
    // (10 by default here), which refuses a call over it with 429 once holds no longer queue on the
    // buyer's accounts across a round trip (docs/benchmarks.md "The twenty-third round").
    const listing = await buildListing({
      endpointUrl: okSeller.url,
      price: 0.01,
      sellerId: sellerAgent.agentId,
      concurrencyLimit: 20,
    });
    const buyer = await funded(1);
    const calls = Array.from({ length: 20 }, () =>
      api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input: {} } }),
    );
    const freeze = api("POST", "/api/admin/custody/freeze", { key: ADMIN_KEY, body: { reason: "race" } });
    const [results, frozen] = await Promise.all([Promise.all(calls), freeze]);
    try {
      expect(frozen.status).toBe(200);
      // A call that held runs to its end: 200, or 202 while it still runs when a loaded machine runs
      // out the invoke's wait for its result (EXECUTE_SYNC_WAIT_MS); its money is counted once it ended.
      for (const r of results) expect([200, 202, 503]).toContain(r.status);
      const ran = results.filter((r) => r.status === 200 || r.status === 202).length;
      await waitFor("the held calls to end", async () => (await balances(buyer.agentId, "USDC")).held === 0n);
      const invocations = await db()("invocations").where({ agent_id: buyer.agentId });
      expect(invocations).toHaveLength(ran);
      const holds = await db()("ledger_transactions")
        .join("invocations", "invocations.id", db().raw("ledger_transactions.reference_id::uuid"))
        .where({ "ledger_transactions.kind": "hold", "invocations.agent_id": buyer.agentId })
        .select("ledger_transactions.created_at");
      expect(holds.length).toBe(ran);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({
        available: usdc(1) - 10_000n * BigInt(ran),
      });
    } finally {
      await api("POST", "/api/admin/custody/unfreeze", { key: ADMIN_KEY, body: { reason: "race over" } });
    }
  });
});
