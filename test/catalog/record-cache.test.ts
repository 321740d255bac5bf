import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { catalogPage, catalogPageJson, marketDocument } from "../../shared/catalog/index.js";
import { recordProbe } from "../../shared/catalog/store/health-probes.js";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { catalogRecordCache } from "../../shared/observability/metrics.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";

// Kept listing records (shared/catalog/record-cache.ts): a catalog page's JSON is catalogPage's, byte for
// byte, whether its records were kept or built; and a kept record is used only while every fact it was
// built from is unchanged. Each write below goes straight to its table or through the domain call that a
// probe, a call or an operator makes: the proof must not depend on who writes.

// Own database: another file's listing writes would move the generation under these pages.
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
beforeAll(async () => {
  ownDb = await useOwnDatabase("record_cache");
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await closeDb();
  await ownDb?.drop();
});

const URL = "http://127.0.0.1:9/invoke";
const OUTCOMES = ["hit", "changed", "miss"] as const;
type Outcome = (typeof OUTCOMES)[number];

async function counts(): Promise<Record<Outcome, number>> {
  const c = { hit: 0, changed: 0, miss: 0 };
  for (const v of (await catalogRecordCache.get()).values) c[v.labels.outcome as Outcome] = v.value;
  return c;
}

/**
 * Reads the page's JSON, checks it against catalogPage's object read just after (and against a read
 * with no record kept), and says how the kept records answered its records.
 */
async function read(search: string): Promise<{ text: string; outcomes: Record<Outcome, number> }> {
  const query = { search, visibility: "registry" as const, limit: 20 };
  const before = await counts();
  const text = (await catalogPageJson(query)).text();
  const after = await counts();
  expect(text).toBe(JSON.stringify(await catalogPage(query)));
  const size = getConfig().catalogRecordCacheSize;
  overrideConfig({ catalogRecordCacheSize: 0 });
  try {
    expect((await catalogPageJson(query)).text()).toBe(text);
  } finally {
    overrideConfig({ catalogRecordCacheSize: size });
  }
  const outcomes = { hit: 0, changed: 0, miss: 0 };
  for (const o of OUTCOMES) outcomes[o] = after[o] - before[o];
  return { text, outcomes };
}

const word = () => `rec${randomBytes(4).toString("hex")}`;

/** The record of `id` on a page's JSON. */
function recordOf(text: string, id: string) {
  const page = JSON.parse(text) as { capabilities: { id: string; [k: string]: unknown }[] };
  return page.capabilities.find((r) => r.id === id)!;
}

async function threeListings(w: string): Promise<ListingRow[]> {
  const seller = await buildAgent("seller");
  return [
    await buildListing({ endpointUrl: URL, tags: [w], sellerId: seller.agentId }),
    await buildListing({ endpointUrl: URL, tags: [w], price: 0.01 }),
    await buildListing({ endpointUrl: URL, tags: [w] }),
  ];
}

describe("kept listing records", () => {
  it("make a page's JSON that is catalogPage's, byte for byte, and serve a page read again", async () => {
    const w = word();
    await threeListings(w);
    expect((await read(w)).outcomes).toEqual({ hit: 0, changed: 0, miss: 3 });
    expect((await read(w)).outcomes).toEqual({ hit: 3, changed: 0, miss: 0 });
    // A search with nothing to match reads no rows and keeps nothing.
    expect((await read("%%")).outcomes).toEqual({ hit: 0, changed: 0, miss: 0 });
  });

  it("are built again when any fact they were built from moves, and only those", async () => {
    const w = word();
    const [sold, paid, plain] = await threeListings(w);
    await read(w);

    // A listing's own column: the generation moves, so every record on the page is proved afresh.
    await db()("listings").where({ id: plain!.id }).update({ description: "changed by an operator" });
    let page = await read(w);
    expect(page.outcomes).toEqual({ hit: 0, changed: 3, miss: 0 });
    expect(recordOf(page.text, plain!.id).description).toBe("changed by an operator");

    // last_success_at refreshed (not its first, which moves the generation) leaves the generation where
    // it was: the record compares it itself.
    await db()("listings")
      .where({ id: plain!.id })
      .update({ last_success_at: new Date("2026-01-01Z") });
    expect((await read(w)).outcomes).toEqual({ hit: 0, changed: 3, miss: 0 });
    await db()("listings")
      .where({ id: plain!.id })
      .update({ last_success_at: new Date("2026-02-01Z") });
    expect((await read(w)).outcomes).toEqual({ hit: 2, changed: 1, miss: 0 });

    // A call recorded: the listing's counters.
    const buyer = await buildAgent();
    const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first("id");
    await db()("invocations").insert({
      agent_id: buyer.agentId,
      api_key_id: key.id,
      listing_id: sold!.id,
      task: "kept-records",
      route: "execute",
      input: {},
      price_micros: "0",
      status: "succeeded",
      completed_at: db().fn.now(),
    });
    page = await read(w);
    expect(page.outcomes).toEqual({ hit: 2, changed: 1, miss: 0 });
    expect(recordOf(page.text, sold!.id).total_invocations).toBe(1);
    expect(recordOf(page.text, sold!.id).days_since_last_invoke).toBe(0);

    // Whole days since that call, with nothing else changed: the clock, eight days on.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 8 * 86_400_000 });
    page = await read(w);
    expect(page.outcomes).toEqual({ hit: 2, changed: 1, miss: 0 });
    expect(recordOf(page.text, sold!.id).days_since_last_invoke).toBe(8);
    expect(recordOf(page.text, sold!.id).activity_status).toBe("idle");
    vi.useRealTimers();

    // The seller's name.
    await db()("agents")
      .where({ id: sold!.seller_id! })
      .update({ name: `renamed ${w}` });
    page = await read(w);
    expect(page.outcomes).toEqual({ hit: 2, changed: 1, miss: 0 });
    expect(JSON.stringify(recordOf(page.text, sold!.id))).toContain(`renamed ${w}`);

    // A health probe (its verdict is a listing column too, so the generation moves with it).
    await recordProbe(
      db(),
      { listing_id: paid!.id, ok: true, http_status: 200, latency_ms: 12, error: null },
      3,
    );
    page = await read(w);
    expect(page.outcomes.hit + page.outcomes.changed).toBe(3);
    expect(recordOf(page.text, paid!.id).endpoint_health).toBe("healthy");
    expect((await read(w)).outcomes).toEqual({ hit: 3, changed: 0, miss: 0 });

    // Each other fact (the paid gate, reviews, the build options) is checked alone, without a database, in
    // test/catalog/listing-record.test.ts "kept records".

    // The configured base of links.
    const base = getConfig().publicBaseUrl;
    overrideConfig({ publicBaseUrl: "https://market.example" });
    try {
      page = await read(w);
      expect(page.outcomes).toEqual({ hit: 0, changed: 3, miss: 0 });
      expect(page.text).toContain("https://market.example/");
    } finally {
      overrideConfig({ publicBaseUrl: base });
    }
  });

  it("make market.json the registry's first page as catalogPage makes it, kept or not", async () => {
    await threeListings(word());
    for (let i = 0; i < 2; i++) {
      const before = await counts();
      const market = (await marketDocument()).parse() as { generated_at: string };
      const page = await catalogPage({ visibility: "registry", limit: 100, offset: 0 });
      expect(market).toEqual({
        schema: `${getConfig().platformId}.market.v1`,
        platform: getConfig().platformId,
        generated_at: market.generated_at,
        ...JSON.parse(JSON.stringify(page)),
      });
      expect(Object.keys(market).slice(0, 4)).toEqual(["schema", "platform", "generated_at", "capabilities"]);
      // The second read serves every record of the page from what the first kept.
      if (i === 1) expect((await counts()).hit - before.hit).toBe(page.capabilities.length);
    }
  });

  it("are at most CATALOG_RECORD_CACHE_SIZE, the least recently used out", async () => {
    const w = word();
    await threeListings(w);
    const size = getConfig().catalogRecordCacheSize;
    overrideConfig({ catalogRecordCacheSize: 2 });
    try {
      await read(w);
      // Three records through room for two: each read of the page finds its first record pushed out.
      expect((await read(w)).outcomes.miss).toBeGreaterThan(0);
    } finally {
      overrideConfig({ catalogRecordCacheSize: size });
    }
  });
});
