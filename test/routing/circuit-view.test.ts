import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { commandRedis } from "../../shared/redis.js";
import { circuitKeys, serviceCircuitOptions } from "../../shared/routing/circuit-breaker.js";
import { circuitSeen, seenOpenCircuits } from "../../shared/routing/circuit-view.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// An execute on kept listings ranks with this process's view of their circuits (shared/routing/circuit-view.ts):
// what it last read or was told by its own gates, for RANKING_STATS_TTL_MS. A circuit that moved behind the
// view's back is met by the call gate, which checks Redis before every call; a refusal the view alone
// caused is decided again on a fresh read. Circuits are moved here straight in Redis, as another
// process's calls would move them. Own database: a listing another file writes meanwhile would move the
// catalog's generation, and the execute after it would read afresh instead of acting on its copy.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let service: TestService;
let buyer: TestAgent;
const sellers: TestSeller[] = [];
const original = getConfig();

beforeAll(async () => {
  ownDb = await useOwnDatabase("circuit_view");
  service = await startService();
  buyer = await buildAgent();
});
afterEach(() => {
  overrideConfig({ rankingStatsTtlMs: original.rankingStatsTtlMs });
});
afterAll(async () => {
  for (const s of sellers) await s.close();
  await service.stop();
  await ownDb?.drop();
});

async function seller(from: string): Promise<string> {
  const s = await startSeller((_call, res) => json(res, 200, { from }));
  sellers.push(s);
  return s.url;
}

const execute = (task: string) =>
  api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: {} } });
const circuitKey = (listingId: string) => circuitKeys(serviceCircuitOptions().prefix, listingId)[0];
/** Opens a listing's circuit in Redis for a minute, as another process's failed calls would. */
const openBehindItsBack = (listingId: string) =>
  commandRedis().hset(circuitKey(listingId), "open_until", String(Date.now() + 60_000), "failures", "5");

describe("the circuit view", () => {
  it("answers only when every listing was seen within the TTL, and half-open is not open", () => {
    overrideConfig({ rankingStatsTtlMs: 1000 });
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    circuitSeen(a, "open", 10_000);
    circuitSeen(b, "half_open", 10_000);
    expect(seenOpenCircuits([a, b], 10_999)).toEqual(new Set([a]));
    expect(seenOpenCircuits([a, b], 11_000)).toBeUndefined();
    expect(seenOpenCircuits([a, c], 10_500)).toBeUndefined();
    circuitSeen(a, "closed", 10_600);
    expect(seenOpenCircuits([a, b], 10_700)).toEqual(new Set());
    overrideConfig({ rankingStatsTtlMs: 0 });
    expect(seenOpenCircuits([a], 10_600)).toBeUndefined();
  });

  it("ranks past a circuit opened behind its back only as far as the gate, which refuses and tells it", async () => {
    overrideConfig({ rankingStatsTtlMs: 60_000 });
    const task = `view-${randomBytes(4).toString("hex")}`;
    const a = await buildListing({
      endpointUrl: await seller("a"),
      tags: [task],
      verificationStatus: "verified",
    });
    const b = await buildListing({ endpointUrl: await seller("b"), tags: [task] });
    // Read once (kept), then once on the copy: the gate has shown this process a's circuit closed.
    expect((await execute(task)).body.provider.listing_id).toBe(a.id);
    expect((await execute(task)).body.provider.listing_id).toBe(a.id);

    await openBehindItsBack(a.id);
    const routed = await execute(task);
    expect(routed.status).toBe(200);
    expect(routed.body.provider.listing_id).toBe(b.id);
    const attempts = await db()("invocation_attempts")
      .where({ invocation_id: routed.body.invocation_id })
      .orderBy("attempt_no");
    expect(attempts.map((x) => [x.listing_id, x.status, x.error_code])).toEqual([
      [a.id, "skipped", "PROVIDER_UNAVAILABLE"],
      [b.id, "succeeded", null],
    ]);

    // The gate's refusal is now in the view: ranking leaves a out, with its reason.
    const next = await execute(task);
    expect(next.body.provider.listing_id).toBe(b.id);
    expect(next.body.selection.excluded).toEqual([{ listing_id: a.id, reason: "circuit_open" }]);
    await commandRedis().del(circuitKey(a.id));
  });

  it("decides again on a fresh read what it refused: a circuit closed behind its back", async () => {
    overrideConfig({ rankingStatsTtlMs: 60_000 });
    const task = `view-${randomBytes(4).toString("hex")}`;
    const a = await buildListing({ endpointUrl: await seller("a"), tags: [task] });
    expect((await execute(task)).body.provider.listing_id).toBe(a.id);
    // The view holds a's circuit open; Redis holds it closed (another process's trial closed it).
    circuitSeen(a.id, "open");
    const routed = await execute(task);
    expect(routed.status).toBe(200);
    expect(routed.body.provider.listing_id).toBe(a.id);
    expect(seenOpenCircuits([a.id])).toEqual(new Set());
  });
});
