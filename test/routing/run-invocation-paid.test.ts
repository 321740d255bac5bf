import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { holdFunds, releaseHold } from "../../shared/money/ledger/flows.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { closeQueues } from "../../shared/queues.js";
import { holdKey, releaseKey } from "../../shared/routing/paid-invocations.js";
import type { InvocationRow } from "../../shared/routing/store/invocations.js";
import { processExecution } from "../../workers/executions.js";
import { buildAgent, buildListing, insertInvocation, type TestAgent } from "../helpers/factories.js";
import { fundAgent } from "../helpers/money.js";
import { json, type SellerHandler, startSeller, type TestSeller } from "../helpers/seller.js";

// The worker's money effects under at-least-once delivery: however many runs an invocation gets, its
// hold is captured or released exactly once, and only the attempt that served is charged.

let seller: TestAgent;
const sellers: TestSeller[] = [];

beforeAll(async () => {
  seller = await buildAgent("seller");
});
afterAll(async () => {
  for (const s of sellers) await s.close();
  await closeQueues();
  await closeDb();
});

async function sellerAt(handler: SellerHandler): Promise<TestSeller> {
  const s = await startSeller(handler);
  sellers.push(s);
  return s;
}

/** A funded buyer and a paid invocation with its hold, as submitInvoke commits them, never enqueued. */
async function paidInvocation(
  listings: ListingRow[],
  holdMicros: bigint,
): Promise<{ buyer: TestAgent; invocation: InvocationRow }> {
  const buyer = await buildAgent();
  await fundAgent(buyer.agentId, 1_000_000n);
  const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first();
  const id = randomUUID();
  const invocation = await db().transaction(async (trx) => {
    const row = await insertInvocation(trx, {
      id,
      agent_id: buyer.agentId,
      api_key_id: key.id,
      listing_id: listings[0]!.id,
      task: listings[0]!.slug,
      route: listings.length > 1 ? "execute" : "invoke",
      input: {},
      max_cost_micros: null,
      price_micros: BigInt(listings[0]!.price_micros),
      hold_micros: holdMicros,
      candidate_ids: listings.map((l) => l.id),
    });
    await holdFunds(
      {
        agentId: buyer.agentId,
        currency: "USDC",
        amountMicros: holdMicros,
        reference: { type: "invocation", id },
        idempotencyKey: holdKey(id),
      },
      trx,
    );
    return row;
  });
  return { buyer, invocation };
}

async function ledgerKinds(invocationId: string): Promise<string[]> {
  const rows = await db()("ledger_transactions").where({ reference_id: invocationId }).orderBy("created_at");
  return rows.map((r) => r.kind).sort();
}

describe("paid invocations in the worker", () => {
  it("two runs started together call once, capture once and write one receipt", async () => {
    const s = await sellerAt((_c, res) => {
      setTimeout(() => json(res, 200, { success: true, output: {} }), 50);
    });
    const listing = await buildListing({ endpointUrl: s.url, price: 0.1, sellerId: seller.agentId });
    const { buyer, invocation } = await paidInvocation([listing], 100_000n);
    const outcomes = await Promise.allSettled([
      processExecution({ invocation_id: invocation.id }),
      processExecution({ invocation_id: invocation.id }),
    ]);
    expect(outcomes.filter((o) => o.status === "fulfilled" && o.value === "succeeded")).toHaveLength(1);
    expect(s.calls).toHaveLength(1);
    expect(await ledgerKinds(invocation.id)).toEqual(["capture", "hold"]);
    expect(await db()("receipts").where({ invocation_id: invocation.id })).toHaveLength(1);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 900_000n, held: 0n });

    expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
    expect(await ledgerKinds(invocation.id)).toEqual(["capture", "hold"]);
    const evidence = await db()("payment_evidence").where({ invocation_id: invocation.id }).select("state");
    // The authorization row is the API's (this test holds directly); the worker adds the rest, once.
    expect(evidence.map((e) => e.state).sort()).toEqual(["capture", "execution", "outcome"]);
  });

  it("a success whose invocation another run ended meanwhile records its attempt alone: no capture, no receipt", async () => {
    // While the seller answers, the invocation is ended elsewhere, its hold released (as a recovery that
    // gave up on the run would) or, to show that the record alone stops the capture, left held: the
    // success's record, sent in one flight with its capture and the COMMIT, fails, and the flight rolls
    // back whole; the attempt's success is then recorded on its own.
    for (const releasedElsewhere of [true, false]) {
      let invocationId = "";
      let buyerId = "";
      const s = await sellerAt(async (_c, res) => {
        await db()("invocations")
          .where({ id: invocationId })
          .update({ status: "failed", completed_at: db().fn.now() });
        if (releasedElsewhere)
          await releaseHold({
            holdKey: holdKey(invocationId),
            expected: {
              agentId: buyerId,
              currency: "USDC",
              amountMicros: 200_000n,
              reference: { type: "invocation", id: invocationId },
            },
            idempotencyKey: releaseKey(invocationId),
          });
        json(res, 200, { success: true, output: {} });
      });
      const listing = await buildListing({ endpointUrl: s.url, price: 0.2, sellerId: seller.agentId });
      const { buyer, invocation } = await paidInvocation([listing], 200_000n);
      invocationId = invocation.id;
      buyerId = buyer.agentId;
      expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
      expect(s.calls).toHaveLength(1);
      expect(await ledgerKinds(invocation.id)).toEqual(releasedElsewhere ? ["hold", "release"] : ["hold"]);
      expect(await db()("receipts").where({ invocation_id: invocation.id })).toHaveLength(0);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject(
        releasedElsewhere ? { available: 1_000_000n, held: 0n } : { available: 800_000n, held: 200_000n },
      );
      expect(await db()("invocations").where({ id: invocation.id }).first()).toMatchObject({
        status: "failed",
      });
      const attempts = await db()("invocation_attempts").where({ invocation_id: invocation.id });
      expect(attempts.map((a) => a.status)).toEqual(["succeeded"]);
      const evidence = await db()("payment_evidence").where({ invocation_id: invocation.id }).pluck("state");
      expect(evidence).not.toContain("capture");
    }
  });

  it("a failed paid invocation is released once, however often it is run again", async () => {
    const s = await sellerAt((_c, res) => json(res, 500, { error: "down" }));
    const listing = await buildListing({
      endpointUrl: s.url,
      price: 0.3,
      sellerId: seller.agentId,
      safeToRetry: false,
    });
    const { buyer, invocation } = await paidInvocation([listing], 300_000n);
    expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
    expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
    expect(await ledgerKinds(invocation.id)).toEqual(["hold", "release"]);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 1_000_000n, held: 0n });
    const refund = await db()("payment_evidence")
      .where({ invocation_id: invocation.id, state: "refund" })
      .first();
    expect(refund).toMatchObject({ source: "ledger_release", amount_micros: "300000" });
  });

  it("fallback to a free listing releases the whole hold and charges nothing", async () => {
    const broken = await sellerAt((_c, res) => json(res, 500, { error: "down" }));
    const free = await sellerAt((_c, res) => json(res, 200, { success: true, output: { free: true } }));
    const paid = await buildListing({
      endpointUrl: broken.url,
      price: 0.2,
      sellerId: seller.agentId,
      safeToRetry: false,
    });
    const gratis = await buildListing({ endpointUrl: free.url, price: 0 });
    const { buyer, invocation } = await paidInvocation([paid, gratis], 200_000n);
    expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
    expect(await ledgerKinds(invocation.id)).toEqual(["hold", "release"]);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 1_000_000n, held: 0n });
    const receipt = await db()("receipts").where({ invocation_id: invocation.id }).first();
    expect(receipt.amount_micros).toBe("0");
  });
});
