import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, insertInvocation, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";

// The seller bond (docs/payments.md "Seller bond") through the HTTP API, with paid execution enabled on a local
// chain. A database of its own: one test freezes custody (platform-wide).

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;

beforeAll(async () => {
  ownDb = await useOwnDatabase("stake");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService({ worker: false, sweeper: false });
});

afterAll(async () => {
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

const USDC = (n: number) => BigInt(Math.round(n * 1_000_000));

/** A seller whose available USDC is `usdc` (credited as a deposit would be). */
async function seller(usdc = 5, intent: "seller" | "both" = "seller"): Promise<TestAgent> {
  const agent = await buildAgent(intent);
  if (usdc > 0) {
    await fundAgent(agent.agentId, USDC(usdc));
  }
  return agent;
}

const stake = (agent: TestAgent, path = "") =>
  api("POST", `/api/stake${path}`, { key: agent.apiKey, body: {} });

function publish(agent: TestAgent, overrides: Record<string, unknown> = {}) {
  return api("POST", "/api/capabilities", {
    key: agent.apiKey,
    body: {
      name: `Listing ${randomUUID().slice(0, 8)}`,
      description: "A listing published by the bond tests.",
      category: "devtools",
      endpoint_url: "http://127.0.0.1:9/invoke",
      pricing_model: "per_call",
      price_per_unit: 0,
      input_schema: { type: "object" },
      tags: ["bond"],
      ...overrides,
    },
  });
}

async function stakes(agent: TestAgent) {
  return db()("stakes").where({ agent_id: agent.agentId }).orderBy("posted_at");
}

async function bondTransactions(agent: TestAgent) {
  return db()("ledger_transactions as t")
    .join("ledger_entries as e", "e.transaction_id", "t.id")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .where({ "a.owner_agent_id": agent.agentId, "a.kind": "bonds" })
    .orderBy("e.id")
    .select("t.kind", "e.amount_micros");
}

async function audit(agent: TestAgent) {
  return db()("audit_events")
    .where({ actor_agent_id: agent.agentId })
    .andWhere("action", "like", "stake.%")
    .orderBy("id")
    .pluck("action");
}

async function setCustody(frozen: boolean): Promise<void> {
  await db()("platform_settings")
    .where({ key: "custody" })
    .update({ value: JSON.stringify({ frozen, reason: frozen ? "test_freeze" : null }) });
}

/** Moves the open bond's posting time back, as if it had been posted `days` days ago. */
async function ageBond(agent: TestAgent, days: number): Promise<void> {
  await db()("stakes")
    .where({ agent_id: agent.agentId })
    .whereNot({ status: "released" })
    .update({ posted_at: db().raw("now() - make_interval(days => ?)", [days]) });
}

describe("POST /api/stake", () => {
  it("posts the $1 bond from available to bonds: 201, audited; posting again is 200 replayed and moves nothing", async () => {
    const agent = await seller(5);
    const first = await stake(agent);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      bonded: true,
      replayed: false,
      stake: { status: "posted", posted_usdc: "1.000000", bonded_usdc: "1.000000", currency: "USDC" },
      can_post: false,
      can_downgrade: false,
      can_release: true,
    });
    expect(first.body.downgrade_blockers).toEqual(["bond_younger_than_30_days"]);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4), bonds: USDC(1) });

    const again = await stake(agent);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ replayed: true, stake: { stake_id: first.body.stake.stake_id } });
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4), bonds: USDC(1) });
    expect(await stakes(agent)).toHaveLength(1);
    expect(await audit(agent)).toEqual(["stake.posted"]);
    expect((await api("GET", "/api/stake", { key: agent.apiKey })).body.stake.stake_id).toBe(
      first.body.stake.stake_id,
    );
  });

  it("ten concurrent posts make one bond and move $1 once", async () => {
    const agent = await seller(5);
    const results = await Promise.all(Array.from({ length: 10 }, () => stake(agent)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(9);
    expect(await stakes(agent)).toHaveLength(1);
    expect(await bondTransactions(agent)).toEqual([{ kind: "bond_post", amount_micros: "1000000" }]);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4), bonds: USDC(1) });
  });

  it("short funds: 402 PAYMENT_REQUIRED saying what to do, and nothing is recorded", async () => {
    const agent = await seller(0.5);
    const res = await stake(agent);
    expect(res.status).toBe(402);
    expect(errorCode(res)).toBe("PAYMENT_REQUIRED");
    expect(res.body.error.details).toMatchObject({
      bond_usdc: "1.000000",
      available_usdc: "0.500000",
      required_usdc: "1.000000",
    });
    expect(res.body.error.details.how_to_fund.join(" ")).toMatch(/POST \/api\/wallet\/purchase/);
    expect(await stakes(agent)).toHaveLength(0);
    expect(await bondTransactions(agent)).toEqual([]);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(0.5), bonds: 0n });
  });

  it("is a paid route: 503 while custody is frozen, before anything", async () => {
    const agent = await seller(5);
    await setCustody(true);
    try {
      const res = await stake(agent);
      expect(res.status).toBe(503);
      expect(res.body.error.details.reason).toBe("platform_custody_frozen");
    } finally {
      await setCustody(false);
    }
    expect(await stakes(agent)).toHaveLength(0);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(5), bonds: 0n });
  });

  it("buyers have nothing to bond: 403 POLICY_BLOCKED; unknown fields are 400", async () => {
    const buyer = await buildAgent("buyer");
    expect(errorCode(await stake(buyer))).toBe("POLICY_BLOCKED");
    const agent = await seller(5);
    const res = await api("POST", "/api/stake", { key: agent.apiKey, body: { amount_usdc: 5 } });
    expect(res.status).toBe(400);
    expect(await stakes(agent)).toHaveLength(0);
  });
});

describe("the bond and publishing", () => {
  it("a bonded seller keeps any number of live listings; the seller status says so", async () => {
    const agent = await seller(5, "both");
    expect((await publish(agent)).status).toBe(201);
    const before = await api("GET", "/api/seller/status", { key: agent.apiKey });
    expect(before.body).toMatchObject({
      stake_required_for_next_listing: true,
      bond: { posted: false, status: null, bonded_usdc: "0.000000" },
      next_best_action: "retire_a_listing_or_post_the_bond_for_another_live_listing",
    });
    expect((await publish(agent)).status).toBe(402);

    expect((await stake(agent)).status).toBe(201);
    for (let i = 0; i < 3; i++) expect((await publish(agent)).status).toBe(201);
    const after = await api("GET", "/api/seller/status", { key: agent.apiKey });
    expect(after.body).toMatchObject({
      live_listings: 4,
      free_concurrent_listing_slots_remaining: 0,
      stake_required_for_next_listing: false,
      bond: { posted: true, status: "posted", bonded_usdc: "1.000000", details: "/api/stake" },
      next_best_action: "publish_listing_with_a_concrete_endpoint",
    });
  });

  it("without a bond, two parallel publishes with one free slot make one listing", async () => {
    const agent = await seller(5);
    const results = await Promise.all([publish(agent), publish(agent)]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 402]);
    expect(await db()("listings").where({ seller_id: agent.agentId }).count({ n: "*" })).toEqual([
      { n: "1" },
    ]);
  });

  it("a release racing a publish beyond the free slot: never both", async () => {
    for (let round = 0; round < 5; round++) {
      const agent = await seller(5);
      expect((await publish(agent)).status).toBe(201);
      expect((await stake(agent)).status).toBe(201);
      const [released, published] = await Promise.all([stake(agent, "/release"), publish(agent)]);
      const live = Number(
        (await db()("listings").where({ seller_id: agent.agentId, status: "active" }).count({ n: "*" }))[0]!
          .n,
      );
      if (released.status === 200) {
        expect(published.status).toBe(402);
        expect(live).toBe(1);
      } else {
        expect(released.status).toBe(409);
        expect(published.status).toBe(201);
        expect(live).toBe(2);
      }
    }
  });
});

describe("POST /api/stake/downgrade", () => {
  it("refuses a bond younger than 30 days, then returns half after 30 days of good standing; the seller stays bonded", async () => {
    const agent = await seller(5);
    await stake(agent);
    const young = await stake(agent, "/downgrade");
    expect(young.status).toBe(409);
    expect(young.body.error.details).toMatchObject({
      reason: "not_eligible_for_downgrade",
      blockers: ["bond_younger_than_30_days"],
    });
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4), bonds: USDC(1) });

    await ageBond(agent, 31);
    const res = await stake(agent, "/downgrade");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      bonded: true,
      stake: { status: "downgraded", posted_usdc: "1.000000", bonded_usdc: "0.500000" },
      can_downgrade: false,
      downgrade_blockers: ["already_downgraded"],
      good_standing: { in_good_standing: true, bond_age_days: 31 },
    });
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4.5), bonds: USDC(0.5) });
    expect((await stake(agent, "/downgrade")).status).toBe(200);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4.5), bonds: USDC(0.5) });
    expect(await bondTransactions(agent)).toEqual([
      { kind: "bond_post", amount_micros: "1000000" },
      { kind: "bond_release", amount_micros: "-500000" },
    ]);
    expect(await audit(agent)).toEqual(["stake.posted", "stake.downgraded"]);
    // Still bonded: a second and third live listing are allowed.
    expect((await publish(agent)).status).toBe(201);
    expect((await publish(agent)).status).toBe(201);
  });

  it("a live listing whose verification failed is not good standing", async () => {
    const agent = await seller(5);
    const listing = await publish(agent);
    await stake(agent);
    await ageBond(agent, 40);
    await db()("listings").where({ id: listing.body.id }).update({ verification_status: "failed" });
    const res = await stake(agent, "/downgrade");
    expect(res.status).toBe(409);
    expect(res.body.error.details.blockers).toEqual(["live_listing_verification_failed"]);
    expect(res.body.error.details.good_standing.failed_listing_ids).toEqual([listing.body.id]);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ bonds: USDC(1) });
  });

  it("more than 10% refunded paid calls in the last 30 days is not good standing; older ones do not count", async () => {
    const agent = await seller(5);
    const listing = (await publish(agent, { price_per_unit: 0.01 })).body;
    await stake(agent);
    await ageBond(agent, 31);
    const buyer = await buildAgent("buyer");
    const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first();
    const call = async (status: "succeeded" | "failed", daysAgo = 0) => {
      const id = randomUUID();
      await insertInvocation(db(), {
        id,
        agent_id: buyer.agentId,
        api_key_id: key.id,
        listing_id: listing.id,
        task: listing.slug,
        route: "invoke",
        input: {},
        max_cost_micros: null,
        price_micros: 10_000n,
        hold_micros: 10_000n,
      });
      await db()("invocations")
        .where({ id })
        .update({ status, created_at: db().raw("now() - make_interval(days => ?)", [daysAgo]) });
    };
    for (let i = 0; i < 9; i++) await call("succeeded");
    await call("failed"); // 1 of 10: exactly 10 %, still good standing
    for (let i = 0; i < 5; i++) await call("failed", 45); // outside the window
    let view = (await api("GET", "/api/stake", { key: agent.apiKey })).body;
    expect(view.good_standing).toMatchObject({
      in_good_standing: true,
      paid_calls_in_window: 10,
      refunded_paid_calls_in_window: 1,
      refund_rate_pct: 10,
    });
    expect(view.can_downgrade).toBe(true);

    await call("failed"); // 2 of 11
    view = (await api("GET", "/api/stake", { key: agent.apiKey })).body;
    expect(view.good_standing.in_good_standing).toBe(false);
    const res = await stake(agent, "/downgrade");
    expect(res.status).toBe(409);
    expect(res.body.error.details.blockers).toEqual(["refunded_paid_calls_above_10_percent"]);
  });

  it("without a bond: 409 no_open_bond", async () => {
    const agent = await seller(5);
    const res = await stake(agent, "/downgrade");
    expect(res.status).toBe(409);
    expect(res.body.error.details.reason).toBe("no_open_bond");
  });
});

describe("POST /api/stake/release", () => {
  it("only once no paid listing is live and no more than the free slot: then the whole bond returns", async () => {
    const agent = await seller(5);
    await stake(agent);
    const paid = (await publish(agent, { price_per_unit: 0.05 })).body;
    const free = (await publish(agent)).body;
    const extra = (await publish(agent)).body;

    const blocked = await stake(agent, "/release");
    expect(blocked.status).toBe(409);
    expect(blocked.body.error.details).toMatchObject({
      blockers: ["paid_listings_live", "live_listings_beyond_free_slot"],
      paid_live_listing_ids: [paid.id],
      live_listings: 3,
    });
    await api("DELETE", `/api/capabilities/${paid.id}`, { key: agent.apiKey });
    const stillTwo = await stake(agent, "/release");
    expect(stillTwo.body.error.details.blockers).toEqual(["live_listings_beyond_free_slot"]);
    await api("DELETE", `/api/capabilities/${extra.id}`, { key: agent.apiKey });
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(4), bonds: USDC(1) });

    // Release moves money only inside the ledger, so it works while custody is frozen.
    await setCustody(true);
    let released: Awaited<ReturnType<typeof stake>>;
    try {
      released = await stake(agent, "/release");
    } finally {
      await setCustody(false);
    }
    expect(released.status).toBe(200);
    expect(released.body).toMatchObject({
      bonded: false,
      stake: { status: "released", bonded_usdc: "0.000000" },
    });
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(5), bonds: 0n });
    expect((await stake(agent, "/release")).status).toBe(200);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(5), bonds: 0n });
    expect(await audit(agent)).toEqual(["stake.posted", "stake.released"]);

    // Unbonded again: the free slot is used (free listing), so a further listing needs a new bond.
    expect(free.status).toBe("active");
    expect((await publish(agent)).status).toBe(402);
    const again = await stake(agent);
    expect(again.status).toBe(201);
    expect(await stakes(agent)).toHaveLength(2);
    expect((await publish(agent)).status).toBe(201);
  });

  it("a downgraded bond releases the half that stayed", async () => {
    const agent = await seller(5);
    await stake(agent);
    await ageBond(agent, 31);
    await stake(agent, "/downgrade");
    const res = await stake(agent, "/release");
    expect(res.status).toBe(200);
    expect(await balances(agent.agentId, "USDC")).toMatchObject({ available: USDC(5), bonds: 0n });
    expect(await bondTransactions(agent)).toEqual([
      { kind: "bond_post", amount_micros: "1000000" },
      { kind: "bond_release", amount_micros: "-500000" },
      { kind: "bond_release", amount_micros: "-500000" },
    ]);
    expect(await audit(agent)).toEqual(["stake.posted", "stake.downgraded", "stake.released"]);
  });
});
