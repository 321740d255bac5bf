import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CATALOG_MOVED, catalogUnmoved } from "../../shared/catalog/index.js";
import { db } from "../../shared/db/knex.js";
import { refusalOf } from "../../shared/db/refusals.js";
import { readTaskListings } from "../../shared/routing/index.js";
import {
  callTargetOf,
  insertClaimedInvocation,
  insertInvocationWithJob,
} from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// An execute ranks a task's listings from the copy this process kept of its last read, and the insert
// that creates the invocation proves the catalog has not moved since (docs/architecture.md "Caches that
// are proved"). Every write below goes straight to the table, as a probe, a migration or an operator's
// psql would: the proof must not depend on who writes.

// Own database: the proof rests on the catalog's generation, which any listing another file writes at
// the same time would move.
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let service: TestService;
let buyer: TestAgent;
const sellers: TestSeller[] = [];

beforeAll(async () => {
  ownDb = await useOwnDatabase("kept_listings");
  service = await startService();
  buyer = await buildAgent();
});
afterAll(async () => {
  for (const s of sellers) await s.close();
  await service.stop();
  await ownDb?.drop();
});

const task = () => `kept-${randomBytes(4).toString("hex")}`;

async function seller(from: string): Promise<string> {
  const s = await startSeller((_call, res) => json(res, 200, { from }));
  sellers.push(s);
  return s.url;
}

const execute = (t: string, input: Record<string, unknown> = {}) =>
  api("POST", "/api/execute", { key: buyer.apiKey, body: { task: t, input } });

/** A task with a verified listing a and a plain listing b, executed twice (served by a, and kept). */
async function twoListingsServedByA() {
  const t = task();
  const a = await buildListing({ endpointUrl: await seller("a"), tags: [t], verificationStatus: "verified" });
  const b = await buildListing({ endpointUrl: await seller("b"), tags: [t] });
  expect((await execute(t)).body.provider.listing_id).toBe(a.id);
  // a's first success is its runtime proof, which moves the catalog generation (migration
  // 20261206000100): the second execute finds its copy moved, reads afresh and keeps that read.
  expect((await execute(t)).body.provider.listing_id).toBe(a.id);
  return { t, a, b };
}

const generation = async (): Promise<bigint> => BigInt((await db()("catalog_generation").first()).generation);

describe("an execute on kept listings", () => {
  it("routes from the copy while the catalog stands, and past a listing retired behind its back", async () => {
    const { t, a, b } = await twoListingsServedByA();
    // The read that execute made is kept, with the generation it was read at.
    const kept = readTaskListings(t);
    expect(kept.generation).toBe((await generation()).toString());
    expect((await kept.listings).map((l) => l.id)).toEqual([a.id, b.id]);
    expect((await execute(t)).body.provider.listing_id).toBe(a.id);

    await db()("listings").where({ id: a.id }).update({ status: "retired" });
    const res = await execute(t);
    expect(res.status).toBe(200);
    expect(res.body.provider.listing_id).toBe(b.id);
    expect(res.body.selection.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([b.id]);
    // Nothing was written for the attempt the moved catalog stopped: one invocation per answer.
    const rows = await db()("invocations").where({ task: t }).select("listing_id");
    expect(rows.map((r) => r.listing_id).sort()).toEqual([a.id, a.id, a.id, b.id].sort());
  });

  it("rolls back a keyed execute's transaction when the catalog moved, and replays its key after", async () => {
    const { t, a, b } = await twoListingsServedByA();
    expect(readTaskListings(t).generation).toBeDefined();
    await db()("listings").where({ id: a.id }).update({ status: "retired" });
    const key = `kept-${randomBytes(6).toString("hex")}`;
    const keyed = () =>
      api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: t, input: {} },
        headers: { "x-idempotency-key": key },
      });
    const first = await keyed();
    expect(first.status).toBe(200);
    expect(first.body.provider.listing_id).toBe(b.id);
    const again = await keyed();
    expect(again.body.invocation_id).toBe(first.body.invocation_id);
    expect(await db()("invocations").where({ task: t, listing_id: b.id }).count({ n: "*" })).toEqual([
      { n: "1" },
    ]);
  });

  it("checks input against a schema changed behind its back, its version unchanged", async () => {
    const t = task();
    const listing = await buildListing({ endpointUrl: await seller("s"), tags: [t] });
    expect((await execute(t, { text: "x" })).status).toBe(200);
    expect(readTaskListings(t).generation).toBeDefined();
    await db()("listings")
      .where({ id: listing.id })
      .update({ input_schema: { type: "object", required: ["url"] } as never });
    const res = await execute(t, { text: "x" });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
  });

  it("decides again on a read what the copy refused: a listing approved since", async () => {
    const t = task();
    const listing = await buildListing({ endpointUrl: await seller("late"), tags: [t] });
    await db()("listings").where({ id: listing.id }).update({ review_status: "pending" });
    expect((await execute(t)).status).toBe(404);
    expect(readTaskListings(t).generation).toBeDefined();
    await db()("listings").where({ id: listing.id }).update({ review_status: "approved" });
    const res = await execute(t);
    expect(res.status).toBe(200);
    expect(res.body.output).toEqual({ from: "late" });
  });
});

describe("the catalog generation", () => {
  it("moves with every listing write in its transaction, and not for a refresh of last_success_at", async () => {
    const listing = await buildListing({ endpointUrl: "http://127.0.0.1:9/invoke" });
    let before = await generation();
    // The first success is the listing's runtime proof (the search lane): it moves the generation.
    await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    expect(await generation()).toBeGreaterThan(before);
    before = await generation();
    // The execute path's later refreshes of the time do not.
    await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    expect(await generation()).toBe(before);
    // An update that changes nothing moves nothing.
    await db()("listings").where({ id: listing.id }).update({ name: listing.name });
    expect(await generation()).toBe(before);

    await db()("listings")
      .where({ id: listing.id })
      .update({ name: `${listing.name} renamed` });
    expect(await generation()).toBeGreaterThan(before);
    before = await generation();
    // Not seen outside the writer's transaction until it commits.
    await db().transaction(async (trx) => {
      await trx("listings").where({ id: listing.id }).update({ price_micros: "5" });
      expect(await generation()).toBe(before);
    });
    expect(await generation()).toBeGreaterThan(before);
    before = await generation();
    await db()("listings").where({ id: listing.id }).del();
    expect(await generation()).toBeGreaterThan(before);
  });

  it("guards the creating insert: a moved catalog writes no invocation, outbox row or attempt", async () => {
    const listing = await buildListing({
      endpointUrl: "http://127.0.0.1:9/invoke",
      maxLatencyMs: 700,
      outputSchema: { type: "object" },
    });
    const staleGeneration = ((await generation()) - 1n).toString();
    const stale = catalogUnmoved(staleGeneration);
    const candidates = [callTargetOf(listing)];
    const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first();
    const row = (id: string) => ({
      id,
      agent_id: buyer.agentId,
      api_key_id: key.id as string,
      listing_id: listing.id,
      task: listing.slug,
      route: "execute" as const,
      input: {},
      max_cost_micros: null,
      price_micros: 0n,
    });
    const timing = { maxCallMs: 1000, marginMs: 1000 };
    const claimed = randomUUID();
    const queued = randomUUID();
    const read = randomUUID();
    expect(
      await insertClaimedInvocation(db(), row(claimed), timing, {
        generation: staleGeneration,
        candidates,
      }),
    ).toBeUndefined();
    expect(await insertInvocationWithJob(db(), row(queued), "executions", stale)).toBeUndefined();
    // Strict (in a transaction, where a paid hold may follow without waiting): the statement fails instead.
    const refusal = (write: Promise<unknown>) =>
      write.then(
        () => "written",
        (error: unknown) => refusalOf(error),
      );
    expect(
      await refusal(
        insertClaimedInvocation(
          db(),
          row(claimed),
          timing,
          { generation: staleGeneration, candidates },
          { strict: true },
        ),
      ),
    ).toBe(CATALOG_MOVED);
    expect(
      await refusal(
        insertInvocationWithJob(
          db(),
          row(queued),
          "executions",
          catalogUnmoved(staleGeneration, { strict: true }),
        ),
      ),
    ).toBe(CATALOG_MOVED);
    for (const id of [claimed, queued]) {
      expect(await db()("invocations").where({ id }).first()).toBeUndefined();
      expect(await db()("job_outbox").where({ job_id: id }).first()).toBeUndefined();
      expect(await db()("invocation_attempts").where({ invocation_id: id }).first()).toBeUndefined();
    }

    const currentGeneration = (await generation()).toString();
    const current = catalogUnmoved(currentGeneration);
    const claim = await insertClaimedInvocation(db(), row(claimed), timing, {
      generation: currentGeneration,
      candidates,
    });
    expect((await insertInvocationWithJob(db(), row(queued), "executions", current))?.id).toBe(queued);
    // The queued one has its outbox row; the claimed one has none (runs-here.ts).
    expect(await db()("job_outbox").whereIn("job_id", [claimed, queued]).pluck("job_id")).toEqual([queued]);
    // The claim on proved candidates answers and writes what the claim that reads them does.
    const readClaim = await insertClaimedInvocation(db(), row(read), timing);
    expect(claim?.candidates).toEqual(readClaim.candidates);
    expect(claim?.attempts).toEqual([]);
    const { id: _a, created_at: _b, started_at: _c, ...rest } = claim!.invocation;
    const { id: _d, created_at: _e, started_at: _f, ...readRest } = readClaim.invocation;
    expect(rest).toEqual(readRest);
    const attempt = async (c: typeof claim) => {
      const a = await db()("invocation_attempts").where({ id: c!.firstAttempt!.id }).first();
      return { ...a, budgetMs: a.deadline_at.getTime() - a.started_at.getTime() };
    };
    const [proved, fresh] = [await attempt(claim), await attempt(readClaim)];
    expect([proved.attempt_no, proved.listing_id, proved.status]).toEqual([1, listing.id, "running"]);
    expect([fresh.attempt_no, fresh.listing_id, fresh.status]).toEqual([1, listing.id, "running"]);
    // min(700, maxCallMs 1000) + marginMs 1000, both ways.
    expect(proved.budgetMs).toBeCloseTo(1700, -1);
    expect(fresh.budgetMs).toBeCloseTo(1700, -1);
  });
});
