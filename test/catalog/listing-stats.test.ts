import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rng } from "../../bench/catalog/random.js";
import type { ListingStats } from "../../shared/catalog/listing-facts.js";
import { readListingStats } from "../../shared/catalog/store/listing-stats.js";
import { foldListingStats } from "../../shared/catalog/store/listing-stats-fold.js";
import { closeDb, type Db, db } from "../../shared/db/knex.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";

// The folded counters (listing_stats + listing_attempt_days + the live tail) against the full
// aggregation over every invocation and attempt that readListingStats used to run on each read. On a
// database of its own: a fold's watermark waits for every open transaction of its database, and other
// test files keep transactions open on the shared one.

let own: Awaited<ReturnType<typeof useOwnDatabase>>;
beforeAll(async () => {
  own = await useOwnDatabase("stats");
});
afterAll(async () => {
  await closeDb();
  await own.drop();
});

const DAY = 86_400_000;

async function fullAggregation(q: Db, ids: string[]) {
  const [invocations, attempts] = await Promise.all([
    q.raw(
      `select listing_id, count(*) as total,
              count(*) filter (where status = 'succeeded') as succeeded,
              count(*) filter (where status = 'failed') as failed,
              count(*) filter (where status = 'succeeded' and price_micros > 0 and currency = 'USDC') as paid,
              max(created_at) as last_invoked_at,
              max(completed_at) filter (where status = 'succeeded' and price_micros > 0 and currency = 'USDC')
                as last_paid_success_at
         from invocations where listing_id = any(?::uuid[]) group by listing_id`,
      [ids],
    ),
    q.raw(
      `select listing_id, count(*) as attempts, count(*) filter (where status = 'succeeded') as succeeded,
              avg(latency_ms) filter (where status = 'succeeded') as avg,
              percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'succeeded') as p50,
              percentile_cont(0.95) within group (order by latency_ms) filter (where status = 'succeeded') as p95
         from invocation_attempts
        where listing_id = any(?::uuid[]) and started_at > now() - interval '30 days'
        group by listing_id`,
      [ids],
    ),
  ]);
  return { invocations: invocations.rows, attempts: attempts.rows };
}

const near = (actual: number | null, expected: unknown, relative: number) => {
  if (expected === null || expected === undefined) return expect(actual).toBeNull();
  const e = Number(expected);
  expect(actual).not.toBeNull();
  expect(Math.abs(actual! - e)).toBeLessThanOrEqual(e * relative + 0.06);
};

async function expectExact(ids: string[]) {
  const stats = await readListingStats(db(), ids);
  const full = await fullAggregation(db(), ids);
  for (const id of ids) {
    const s = stats.get(id) as ListingStats;
    const inv = full.invocations.find((r: { listing_id: string }) => r.listing_id === id);
    expect(s.total_invocations, id).toBe(Number(inv?.total ?? 0));
    expect(s.success_count).toBe(Number(inv?.succeeded ?? 0));
    expect(s.failure_count).toBe(Number(inv?.failed ?? 0));
    expect(s.paid_success_count).toBe(Number(inv?.paid ?? 0));
    expect(s.last_invoked_at?.getTime() ?? null).toBe(inv?.last_invoked_at?.getTime() ?? null);
    expect(s.last_paid_success_at?.getTime() ?? null).toBe(inv?.last_paid_success_at?.getTime() ?? null);
    const att = full.attempts.find((r: { listing_id: string }) => r.listing_id === id);
    expect(s.attempts_30d).toBe(Number(att?.attempts ?? 0));
    expect(s.successful_attempts_30d).toBe(Number(att?.succeeded ?? 0));
    near(s.avg_latency_ms, att?.avg ?? null, 0);
    near(s.p50_latency_ms, att?.p50 ?? null, 0.045);
    near(s.p95_latency_ms, att?.p95 ?? null, 0.045);
  }
}

async function keyOf(agentId: string): Promise<string> {
  return (await db()("api_keys").where({ agent_id: agentId }).first("id")).id;
}

type Status = "awaiting_approval" | "queued" | "running" | "succeeded" | "failed";

interface Call {
  listingId: string;
  status: Status;
  currency?: "USDC" | "tUSDC";
  priceMicros?: number;
  /** Backdated by this many ms; absent = now() of the inserting transaction, as the service does. */
  ageMs?: number;
  attempts?: { status: "running" | "succeeded" | "failed" | "abandoned"; latencyMs: number | null }[];
}

async function insertCall(q: Db, agent: { agentId: string; keyId: string }, call: Call): Promise<string> {
  const final = call.status === "succeeded" || call.status === "failed";
  const at = call.ageMs === undefined ? q.fn.now() : new Date(Date.now() - call.ageMs);
  const [row] = await q("invocations")
    .insert({
      agent_id: agent.agentId,
      api_key_id: agent.keyId,
      listing_id: call.listingId,
      task: "stats",
      route: call.currency === "tUSDC" ? "tumbler" : "execute",
      input: {},
      price_micros: String(call.priceMicros ?? 0),
      currency: call.currency ?? "USDC",
      status: call.status,
      created_at: at,
      completed_at: final ? at : null,
    })
    .returning("id");
  let n = 0;
  for (const a of call.attempts ?? []) {
    await q("invocation_attempts").insert({
      invocation_id: row.id,
      attempt_no: ++n,
      listing_id: call.listingId,
      status: a.status,
      latency_ms: a.latencyMs,
      started_at: at,
      finished_at: a.status === "running" ? null : at,
    });
  }
  return row.id as string;
}

function randomCall(rand: () => number, listingId: string, backdated: boolean): Call {
  const r = rand();
  const status: Status =
    r < 0.55
      ? "succeeded"
      : r < 0.8
        ? "failed"
        : r < 0.9
          ? "running"
          : r < 0.95
            ? "queued"
            : "awaiting_approval";
  // Ages avoid the minute around the 30-day cut, which moves between the two reads compared.
  let ageMs: number | undefined;
  if (backdated) {
    do ageMs = Math.floor(rand() * 40 * DAY);
    while (Math.abs(ageMs - 30 * DAY) < 120_000);
  }
  const attempts: Call["attempts"] = [];
  const count = status === "awaiting_approval" || status === "queued" ? 0 : 1 + Math.floor(rand() * 2);
  for (let i = 0; i < count; i++) {
    const last = i === count - 1;
    const s = !last
      ? "failed"
      : status === "succeeded"
        ? "succeeded"
        : status === "running"
          ? "running"
          : rand() < 0.5
            ? "failed"
            : "abandoned";
    attempts.push({
      status: s,
      latencyMs: s === "running" || rand() < 0.05 ? null : Math.floor(rand() ** 3 * 5000),
    });
  }
  return {
    listingId,
    status,
    currency: rand() < 0.3 ? "tUSDC" : "USDC",
    priceMicros: rand() < 0.3 ? 0 : 20_000,
    ageMs,
    attempts,
  };
}

/** Finishes some open invocations and attempts the way the execute path does (now()). */
async function finishSome(rand: () => number, ids: string[]) {
  const open = await db()("invocations")
    .whereIn("listing_id", ids)
    .whereIn("status", ["queued", "running", "awaiting_approval"]);
  for (const inv of open) {
    if (rand() < 0.5) continue;
    const status = rand() < 0.7 ? "succeeded" : "failed";
    await db()("invocation_attempts")
      .where({ invocation_id: inv.id, status: "running" })
      .update({ status, latency_ms: Math.floor(rand() * 900), finished_at: db().fn.now() });
    await db()("invocations").where({ id: inv.id }).update({ status, completed_at: db().fn.now() });
  }
}

describe("listing counters folded incrementally", () => {
  it("equal the full aggregation on random histories, through folds, new rows and late finishes", async () => {
    const rand = rng(2101);
    const buyer = await buildAgent();
    const agent = { agentId: buyer.agentId, keyId: await keyOf(buyer.agentId) };
    const listings = await Promise.all(
      [0, 1, 2, 3].map(() => buildListing({ endpointUrl: "http://127.0.0.1:9/x" })),
    );
    const ids = listings.map((l) => l.id);
    for (let i = 0; i < 400; i++) await insertCall(db(), agent, randomCall(rand, ids[i % 3]!, true));
    await expectExact(ids); // nothing folded yet: all tail
    for (const round of [0, 1, 2, 3]) {
      for (const id of ids.slice(0, 3)) expect(await foldListingStats(db(), id)).toBe(true);
      await expectExact(ids);
      for (let i = 0; i < 40; i++)
        await insertCall(db(), agent, randomCall(rand, ids[(i + round) % 4]!, false));
      await expectExact(ids);
      await finishSome(rand, ids);
      await expectExact(ids);
    }
    const [row] = await db()("listing_stats").where({ listing_id: ids[0] });
    expect(Number(row.total_invocations)).toBeGreaterThan(0);
  });

  it("a read past FOLD_AFTER_TAIL_ROWS folds the listing, and the counters stay the same", async () => {
    const rand = rng(7);
    const buyer = await buildAgent();
    const agent = { agentId: buyer.agentId, keyId: await keyOf(buyer.agentId) };
    const { id } = await buildListing({ endpointUrl: "http://127.0.0.1:9/x" });
    for (let i = 0; i < 220; i++) await insertCall(db(), agent, randomCall(rand, id, true));
    expect(await db()("listing_stats").where({ listing_id: id }).first()).toBeUndefined();
    await expectExact([id]);
    expect(await db()("listing_stats").where({ listing_id: id }).first()).toBeDefined();
    await expectExact([id]);
  });

  it("a fold racing an open transaction keeps its rows out of the folded part until they commit", async () => {
    const buyer = await buildAgent();
    const agent = { agentId: buyer.agentId, keyId: await keyOf(buyer.agentId) };
    const { id } = await buildListing({ endpointUrl: "http://127.0.0.1:9/x" });
    const open = await insertCall(db(), agent, {
      listingId: id,
      status: "running",
      priceMicros: 5,
      ageMs: 60_000,
      attempts: [{ status: "running", latencyMs: null }],
    });
    await insertCall(db(), agent, {
      listingId: id,
      status: "succeeded",
      priceMicros: 5,
      ageMs: 50_000,
      attempts: [{ status: "succeeded", latencyMs: 40 }],
    });
    const trx = await db().transaction();
    try {
      const started = (await trx.raw("select now() as at")).rows[0].at as Date;
      // A new paid call and the open one finished, neither committed while the fold runs.
      await insertCall(trx, agent, {
        listingId: id,
        status: "succeeded",
        priceMicros: 5,
        attempts: [{ status: "succeeded", latencyMs: 70 }],
      });
      await trx("invocation_attempts")
        .where({ invocation_id: open })
        .update({ status: "succeeded", latency_ms: 90, finished_at: trx.fn.now() });
      await trx("invocations")
        .where({ id: open })
        .update({ status: "succeeded", completed_at: trx.fn.now() });
      expect(await foldListingStats(db(), id)).toBe(true);
      const row = await db()("listing_stats").where({ listing_id: id }).first();
      expect(row.folded_before.getTime()).toBeLessThanOrEqual(started.getTime());
      expect(row.pending_invocation_ids).toEqual([open]);
      await trx.commit();
    } catch (error) {
      await trx.rollback();
      throw error;
    }
    await expectExact([id]);
    expect((await readListingStats(db(), [id])).get(id)).toMatchObject({
      total_invocations: 3,
      success_count: 3,
      paid_success_count: 3,
    });
    expect(await foldListingStats(db(), id)).toBe(true);
    await expectExact([id]);
    const row = await db()("listing_stats").where({ listing_id: id }).first();
    expect(Number(row.total_invocations)).toBe(3);
    expect(row.pending_invocation_ids).toEqual([]);
  });

  it("two folds of one listing at once: one folds, the other steps aside, nothing counted twice", async () => {
    const rand = rng(99);
    const buyer = await buildAgent();
    const agent = { agentId: buyer.agentId, keyId: await keyOf(buyer.agentId) };
    const { id } = await buildListing({ endpointUrl: "http://127.0.0.1:9/x" });
    for (let i = 0; i < 60; i++) await insertCall(db(), agent, randomCall(rand, id, true));
    const folded = await Promise.all([
      foldListingStats(db(), id),
      foldListingStats(db(), id),
      foldListingStats(db(), id),
    ]);
    expect(folded.filter(Boolean).length).toBeGreaterThanOrEqual(1);
    await expectExact([id]);
  });
});
