import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ListingSearch, searchListings } from "../../shared/catalog/store/listing-search.js";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { keepPage, keptPageRows } from "../../shared/catalog/store/page-cache.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { catalogPageCache } from "../../shared/observability/metrics.js";
import { buildListing } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";

// Kept catalog pages (shared/catalog/store/page-cache.ts): a page read again is served from what the
// process kept only while the catalog generation proves it current, and is then exactly what a fresh
// read answers, its rows read afresh. Every write below goes straight to the table, as a probe, a
// migration or an operator's psql would: the proof must not depend on who writes.

// Own database: any listing another file writes at the same time would move the generation.
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
beforeAll(async () => {
  ownDb = await useOwnDatabase("page_cache");
});
afterAll(async () => {
  await closeDb();
  await ownDb?.drop();
});

const URL = "http://127.0.0.1:9/invoke";

/** How many pages each outcome has counted so far. */
async function outcomes(): Promise<Record<"hit" | "moved" | "miss", number>> {
  const counts = { hit: 0, moved: 0, miss: 0 };
  for (const v of (await catalogPageCache.get()).values)
    counts[v.labels.outcome as keyof typeof counts] = v.value;
  return counts;
}

/** Reads a page and says how the kept pages answered it. */
async function read(c: ListingSearch) {
  const before = await outcomes();
  const page = await searchListings(db(), c);
  const after = await outcomes();
  const outcome = (["hit", "moved", "miss"] as const).find((o) => after[o] > before[o]) ?? "not asked";
  return { page, outcome };
}

/** The same page read afresh, with no page kept. */
async function fresh(c: ListingSearch) {
  const size = getConfig().catalogPageCacheSize;
  overrideConfig({ catalogPageCacheSize: 0 });
  try {
    return await searchListings(db(), c);
  } finally {
    overrideConfig({ catalogPageCacheSize: size });
  }
}

const page = (over: Partial<ListingSearch>): ListingSearch => ({
  lane: "registry",
  limit: 20,
  offset: 0,
  featuredPerSeller: 3,
  matchCap: 1000,
  ...over,
});

const word = () => `kept${randomBytes(4).toString("hex")}`;

describe("kept catalog pages", () => {
  it("serve a page read again, equal to a fresh read, its rows read afresh", async () => {
    const w = word();
    const listings: ListingRow[] = [];
    for (let i = 0; i < 3; i++) listings.push(await buildListing({ endpointUrl: URL, tags: [w] }));
    const c = page({ search: w });

    const first = await read(c);
    expect(first.outcome).toBe("miss");
    expect(first.page.rows.map((r) => r.id).sort()).toEqual(listings.map((l) => l.id).sort());
    const second = await read(c);
    expect(second.outcome).toBe("hit");
    expect(second.page).toEqual(first.page);
    expect(second.page).toEqual(await fresh(c));

    // last_success_at refreshed (not its first): the generation stays, the page is still kept, and its
    // rows carry the new time.
    await db()("listings")
      .where({ id: listings[0]!.id })
      .update({ last_success_at: new Date("2026-01-01T00:00:00Z") });
    await read(c);
    await db()("listings")
      .where({ id: listings[0]!.id })
      .update({ last_success_at: new Date("2026-02-01T00:00:00Z") });
    const refreshed = await read(c);
    expect(refreshed.outcome).toBe("hit");
    const row = refreshed.page.rows.find((r) => r.id === listings[0]!.id)!;
    expect(new Date(row.last_success_at!).toISOString()).toBe("2026-02-01T00:00:00.000Z");
    expect(refreshed.page).toEqual(await fresh(c));
  });

  it("are read afresh after any listing write: a change, a new listing, a retirement, a deletion", async () => {
    const w = word();
    const a = await buildListing({ endpointUrl: URL, tags: [w], name: `${w} alpha` });
    const b = await buildListing({ endpointUrl: URL, tags: [w], name: `${w} beta` });
    const c = page({ search: w });
    const ids = async () => (await read(c)).page.rows.map((r) => r.id).sort();
    await read(c);
    expect((await read(c)).outcome).toBe("hit");

    // An unrelated listing's write moves the catalog too: the page is proved afresh, not trusted.
    await buildListing({ endpointUrl: URL, tags: [word()] });
    expect((await read(c)).outcome).toBe("moved");

    await db()("listings")
      .where({ id: a.id })
      .update({ tags: ["elsewhere"], name: "Elsewhere" });
    expect(await ids()).toEqual([b.id]);
    const n = await buildListing({ endpointUrl: URL, tags: [w] });
    expect(await ids()).toEqual([b.id, n.id].sort());
    await db()("listings").where({ id: n.id }).update({ status: "retired" });
    expect(await ids()).toEqual([b.id]);
    await db()("listings").where({ id: b.id }).del();
    const after = await read(c);
    expect(after.outcome).toBe("moved");
    expect(after.page).toEqual({ rows: [], total: 0, totalRelation: "eq", generation: expect.any(String) });
    expect(await fresh(c)).toEqual(after.page);
  });

  it("follow a listing's first success into the search lane", async () => {
    const w = word();
    const listing = await buildListing({ endpointUrl: URL, tags: [w] });
    const c = page({ search: w, lane: "search" });
    await read(c);
    expect((await read(c)).page.rows).toEqual([]);
    // The runtime proof: its first successful call puts it in the search lane and moves the generation.
    await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    const after = await read(c);
    expect(after.outcome).toBe("moved");
    expect(after.page.rows.map((r) => r.id)).toEqual([listing.id]);
  });

  it("keep browse pages (no search words) and pages past the last alike", async () => {
    const category = word();
    const listing = await buildListing({ endpointUrl: URL, category });
    const c = page({ category });
    await read(c);
    const again = await read(c);
    expect(again.outcome).toBe("hit");
    expect(again.page).toEqual({
      rows: [expect.objectContaining({ id: listing.id })],
      total: 1,
      totalRelation: "eq",
      generation: expect.any(String),
    });
    const past = page({ category, offset: 5 });
    await read(past);
    const pastAgain = await read(past);
    expect(pastAgain.outcome).toBe("hit");
    expect(pastAgain.page).toEqual({
      rows: [],
      total: 1,
      totalRelation: "eq",
      generation: expect.any(String),
    });
  });

  it("keep a later generation's page over an earlier one that finished after it", async () => {
    const listing = await buildListing({ endpointUrl: URL, tags: [word()] });
    const current = BigInt((await db()("catalog_generation").first()).generation);
    const key = `out-of-order-${word()}`;
    keepPage(db(), key, { generation: current.toString(), ids: [listing.id], total: 1 });
    // A read that began before the last listing write ends now, with what it saw then.
    keepPage(db(), key, { generation: (current - 1n).toString(), ids: [], total: 0 });
    const kept = await keptPageRows(db(), key);
    expect(kept?.total).toBe(1);
    expect(kept?.rows.map((r) => r.id)).toEqual([listing.id]);
  });

  it("keep at most CATALOG_PAGE_CACHE_SIZE pages, the least recently used out; 0 keeps none", async () => {
    const size = getConfig().catalogPageCacheSize;
    const [x, y] = [word(), word()];
    await buildListing({ endpointUrl: URL, tags: [x] });
    await buildListing({ endpointUrl: URL, tags: [y] });
    try {
      overrideConfig({ catalogPageCacheSize: 1 });
      await read(page({ search: x }));
      await read(page({ search: y }));
      expect((await read(page({ search: x }))).outcome).toBe("miss");
      expect((await read(page({ search: x }))).outcome).toBe("hit");
      overrideConfig({ catalogPageCacheSize: 0 });
      expect((await read(page({ search: x }))).outcome).toBe("not asked");
    } finally {
      overrideConfig({ catalogPageCacheSize: size });
    }
  });
  it("read a page again in one snapshot when a listing is written between its two statements", async () => {
    const w = word();
    const staying = await buildListing({ endpointUrl: URL, tags: [w] });
    const leaving = await buildListing({ endpointUrl: URL, tags: [w] });
    const c = page({ search: w });
    // The page's own statement answers, and before its rows are read one of its listings is retired by
    // another connection.
    let statements = 0;
    const racing = new Proxy(db(), {
      get(target, property) {
        if (property === "raw")
          return (sql: string, bindings: never) => {
            // The search's own expressions are built with raw too: only the page's statement is sent.
            if (!sql.includes("total_matches")) return target.raw(sql, bindings);
            return target.raw(sql, bindings).then(async (result) => {
              statements += 1;
              if (statements === 1)
                await db()("listings").where({ id: leaving.id }).update({ status: "retired" });
              return result;
            });
          };
        const value = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const answer = await searchListings(racing, c);
    // Without the rows' proof the retired listing would be served; with it, the page is computed again.
    expect(statements).toBe(1);
    expect(answer.rows.map((r) => r.id)).toEqual([staying.id]);
    expect(answer).toEqual(await fresh(c));
  });
});
