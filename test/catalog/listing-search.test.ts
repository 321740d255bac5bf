import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { pick, rng } from "../../bench/catalog/random.js";
import {
  categoryCounts,
  pageSql,
  searchListings,
  searchStatement,
} from "../../shared/catalog/store/listing-search.js";
import { type Lane, retireListing, updateListing } from "../../shared/catalog/store/listings.js";
import { db } from "../../shared/db/knex.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { planNodes } from "../helpers/plans.js";

// listing_search, the narrow copy catalog search matches and ranks over, kept by a trigger on listings:
// it must hold exactly the registry lane's listings with their current vector, flags and order keys,
// whatever writes them, and searching it must answer what the query over listings answered.

const URL = "http://127.0.0.1:9/invoke";
const REGISTRY = `l.status = 'active' and l.review_status = 'approved' and l.verification_status is distinct from 'failed'`;
const SEARCH_LANE = `(l.verification_status in ('verified', 'reachable') or l.last_success_at is not null)`;

/** What listing_search must hold for a listing, derived from listings alone (undefined: no row). */
async function expectedRow(id: string) {
  const { rows } = await db().raw(
    `select l.id as listing_id, l.search_vector::text as search_vector, lower(l.name) as name_lower, l.category,
            l.tool_id, l.seller_id, coalesce(${SEARCH_LANE}, false) as search_lane, l.featured, l.created_at
       from listings l where l.id = ? and ${REGISTRY}`,
    [id],
  );
  return rows[0];
}

async function actualRow(id: string) {
  const { rows } = await db().raw(
    `select listing_id, search_vector::text as search_vector, name_lower, category, tool_id, seller_id,
            search_lane, featured, created_at
       from listing_search where listing_id = ?`,
    [id],
  );
  return rows[0];
}

async function expectInSync(id: string, present: boolean, searchLane?: boolean): Promise<void> {
  const [expected, actual] = await Promise.all([expectedRow(id), actualRow(id)]);
  expect(actual).toEqual(expected);
  expect(actual !== undefined).toBe(present);
  if (searchLane !== undefined) expect(actual?.search_lane).toBe(searchLane);
}

describe("listing_search stays in sync with listings", () => {
  it("follows create, change, visibility changes, runtime proof and retirement", async () => {
    const seller = await buildAgent("seller");
    const listing = await buildListing({
      endpointUrl: URL,
      sellerId: seller.agentId,
      name: "Sync probe one",
    });
    await expectInSync(listing.id, true, false);

    // A change through the store (name, tags, category) reaches the vector, the name and the category.
    const changed = await db().transaction((trx) =>
      updateListing(
        trx,
        listing,
        { name: "Renamed probe", tags: ["zebra-tag"], category: "renamed", version: "1.0.1" },
        seller.agentId,
      ),
    );
    await expectInSync(listing.id, true, false);
    expect((await actualRow(listing.id)).search_vector).toContain("'zebra-tag'");

    // Visibility: a verdict moves it into the search lane, failed takes it out of every lane.
    await db()("listings").where({ id: listing.id }).update({ verification_status: "reachable" });
    await expectInSync(listing.id, true, true);
    await db()("listings").where({ id: listing.id }).update({ featured: true });
    await expectInSync(listing.id, true, true);
    await db()("listings").where({ id: listing.id }).update({ verification_status: "failed" });
    await expectInSync(listing.id, false);
    await db()("listings").where({ id: listing.id }).update({ verification_status: null });
    await expectInSync(listing.id, true, false);
    await db()("listings").where({ id: listing.id }).update({ review_status: "pending" });
    await expectInSync(listing.id, false);
    await db()("listings").where({ id: listing.id }).update({ review_status: "approved" });
    await expectInSync(listing.id, true, false);

    // Runtime proof (what the execute path's first success writes) and its later refreshes.
    await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    await expectInSync(listing.id, true, true);
    await db()("listings")
      .where({ id: listing.id })
      .update({ last_success_at: db().raw("now() + interval '1 minute'") });
    await expectInSync(listing.id, true, true);

    expect(changed.version).toBe("1.0.1");
    await retireListing(db(), listing.id);
    await expectInSync(listing.id, false);
  });

  it("holds no row for a listing created retired or failed, and a row for a verified one", async () => {
    const retired = await buildListing({ endpointUrl: URL, status: "retired" });
    const failed = await buildListing({ endpointUrl: URL, verificationStatus: "failed" });
    const verified = await buildListing({ endpointUrl: URL, verificationStatus: "verified" });
    await expectInSync(retired.id, false);
    await expectInSync(failed.id, false);
    await expectInSync(verified.id, true, true);
  });

  it("rolls back with the writer's transaction", async () => {
    const listing = await buildListing({ endpointUrl: URL });
    await db()
      .transaction(async (trx) => {
        await trx("listings").where({ id: listing.id }).update({ status: "retired" });
        throw new Error("abort");
      })
      .catch(() => undefined);
    await expectInSync(listing.id, true, false);
  });
});

/** The query searchListings ran over listings before listing_search (tool_id is null for these rows). */
async function previousSearch(
  lane: Lane,
  category: string,
  search: string | undefined,
  ts: string | undefined,
  limit: number,
  offset: number,
) {
  const laneSql =
    lane === "registry"
      ? REGISTRY
      : lane === "search"
        ? `${REGISTRY} and ${SEARCH_LANE}`
        : `${REGISTRY} and ${SEARCH_LANE} and l.featured and
           (select count(*) from listings earlier
             where earlier.featured and earlier.status = 'active'
               and earlier.seller_id is not distinct from l.seller_id
               and (earlier.created_at, earlier.id) < (l.created_at, l.id)) < 3`;
  // Without search words every listing of the lane matches, with the same rank.
  const { rows } = await db().raw(
    `with m as materialized (
       select l.id, l.featured, l.created_at, ts_rank(l.search_vector, to_tsquery('simple', :ts)) as rank
         from listings l
        where ${laneSql} and l.category = :category
          ${search ? "and (l.search_vector @@ to_tsquery('simple', :ts) or lower(l.name) like :like)" : ""})
     select id, (select count(*) from m) as total from m
      order by rank desc, featured desc, created_at, id limit :limit offset :offset`,
    { ts: ts ?? "", category, like: `%${search}%`, limit, offset },
  );
  return {
    ids: rows.map((r: { id: string }) => r.id),
    total: rows.length ? Number(rows[0].total) : undefined,
  };
}

describe("search over listing_search", () => {
  it("answers what the query over listings answered: same page, order and total in every lane", async () => {
    const rand = rng(2126);
    const category = `cmp-${randomBytes(4).toString("hex")}`;
    const words = ["alpha", "alphabet", "beta", "gamma", "delta", "deltoid", "omega"];
    const sellers = [await buildAgent("seller"), await buildAgent("seller")];
    for (let i = 0; i < 120; i++) {
      const phrase = (n: number) => Array.from({ length: n }, () => pick(rand, words)).join(" ");
      const listing = await buildListing({
        endpointUrl: URL,
        category,
        name: `${phrase(2)} ${i}`,
        description: `${phrase(1 + Math.floor(rand() * 12))} tool`,
        tags: [pick(rand, words)],
        featured: rand() < 0.3,
        sellerId: pick(rand, sellers).agentId,
        status: rand() < 0.1 ? "retired" : "active",
        verificationStatus: pick(rand, [null, null, "verified", "reachable", "failed"] as const),
      });
      if (rand() < 0.2)
        await db()("listings").where({ id: listing.id }).update({ last_success_at: db().fn.now() });
    }
    let compared = 0;
    for (const lane of ["registry", "search", "featured"] as Lane[]) {
      for (const [search, ts] of [
        ["alpha", "alpha:*"],
        ["delt", "delt:*"],
        ["beta gamma", "beta:* & gamma:*"],
        ["omega", "omega:*"],
        [undefined, undefined],
      ] as const) {
        for (const [limit, offset] of [
          [20, 0],
          [7, 5],
          [100, 0],
          [20, 200],
        ] as const) {
          const now = await searchListings(db(), {
            search,
            category,
            lane,
            limit,
            offset,
            featuredPerSeller: 3,
            matchCap: 1000,
          });
          const before = await previousSearch(lane, category, search, ts, limit, offset);
          expect(now.rows.map((r) => r.id)).toEqual(before.ids);
          expect(now.totalRelation).toBe("eq");
          if (before.total !== undefined) expect(now.total).toBe(before.total);
          // Past the last page: no rows, and still the exact total.
          else expect(now.total).toBe((await previousSearch(lane, category, search, ts, 200, 0)).ids.length);
          compared += now.rows.length;
        }
      }
    }
    expect(compared).toBeGreaterThan(300);
  });
});

describe("search past its match cap", () => {
  it("ranks and counts the first matchCap matches: total is the cap, the pages hold them ranked", async () => {
    const category = `cap-${randomBytes(4).toString("hex")}`;
    const seller = await buildAgent("seller");
    for (let i = 0; i < 30; i++) {
      await buildListing({
        endpointUrl: URL,
        category,
        sellerId: seller.agentId,
        // A third hold the word in the name (rank weight A), the rest in the description only (C).
        name: i % 3 === 0 ? `kappa tool ${i}` : `other tool ${i}`,
        description: i % 3 === 0 ? "a tool" : `kappa ${"kappa ".repeat(i % 4)}tool`,
      });
    }
    const search = (matchCap: number, limit: number, offset: number) =>
      searchListings(db(), {
        search: "kappa",
        category,
        lane: "registry",
        limit,
        offset,
        featuredPerSeller: 3,
        matchCap,
      });

    const whole = await search(10, 100, 0);
    expect(whole).toMatchObject({ total: 10, totalRelation: "gte" });
    expect(whole.rows).toHaveLength(10);
    // Pages over the capped set: the same ten, in the same order, and nothing past the cap.
    const paged = [
      ...(await search(10, 4, 0)).rows,
      ...(await search(10, 4, 4)).rows,
      ...(await search(10, 4, 8)).rows,
    ];
    expect(paged.map((r) => r.id)).toEqual(whole.rows.map((r) => r.id));
    expect(await search(10, 4, 12)).toMatchObject({ rows: [], total: 10, totalRelation: "gte" });
    // The ten are ranked as the uncapped search ranks them.
    const { rows: ranked } = await db().raw(
      `select s.listing_id as id from listing_search s
        where s.listing_id = any(?::uuid[])
        order by ts_rank(s.search_vector, to_tsquery('simple', 'kappa:*')) desc, s.featured desc, s.created_at, s.listing_id`,
      [whole.rows.map((r) => r.id)],
    );
    expect(whole.rows.map((r) => r.id)).toEqual(ranked.map((r: { id: string }) => r.id));

    // At or above the number of matches every match is ranked and counted exactly.
    const exact = await search(30, 100, 0);
    expect(exact).toMatchObject({ total: 30, totalRelation: "eq" });
    expect(exact.rows.map((r) => r.id)).toEqual(
      (await previousSearch("registry", category, "kappa", "kappa:*", 100, 0)).ids,
    );
    expect(await search(29, 100, 0)).toMatchObject({ total: 29, totalRelation: "gte" });
    // Read again, the capped set is the same: a page after another stays in one ranking.
    expect(await search(10, 100, 0).then((p) => p.rows.map((r) => r.id))).toEqual(
      whole.rows.map((r) => r.id),
    );

    // The scan stops at the cut: it yields matchCap + 1 rows, not all 30 (the CTE is read lazily).
    const statement = searchStatement(
      db(),
      {
        search: "kappa",
        category,
        lane: "registry",
        limit: 20,
        offset: 0,
        featuredPerSeller: 3,
        matchCap: 10,
      },
      "kappa",
    )!;
    const scans = (await planNodes(db(), pageSql(statement), statement.bindings, { analyze: true })).filter(
      (n) => n["Relation Name"] === "listing_search",
    );
    expect(scans.length).toBeGreaterThan(0);
    for (const scan of scans) expect(scan["Actual Rows"]).toBe(11);
  });
});

describe("categoryCounts over listing_search", () => {
  it("counts each category's registry-lane listings, as the rule over listings does", async () => {
    const rand = rng(77);
    const prefix = `cc-${randomBytes(3).toString("hex")}`;
    const categories = [`${prefix}-a`, `${prefix}-b`, `${prefix}-c`];
    for (let i = 0; i < 40; i++) {
      const listing = await buildListing({
        endpointUrl: URL,
        category: pick(rand, categories),
        status: rand() < 0.2 ? "retired" : "active",
        verificationStatus: pick(rand, [null, "verified", "failed"] as const),
      });
      if (rand() < 0.15)
        await db()("listings").where({ id: listing.id }).update({ review_status: "pending" });
    }
    const { rows } = await db().raw(
      `select l.category, count(*)::int as listings from listings l
        where ${REGISTRY} and l.category like ? group by l.category`,
      [`${prefix}-%`],
    );
    const expected = new Map(
      rows.map((r: { category: string; listings: number }) => [r.category, r.listings]),
    );
    const counted = new Map(
      (await categoryCounts(db()))
        .filter((c) => c.category.startsWith(prefix))
        .map((c) => [c.category, c.listings]),
    );
    expect(counted).toEqual(expected);
    expect([...counted.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(10);
  });
});
