import { createHash } from "node:crypto";
import type { Knex } from "knex";
import type { Db } from "../../db/knex.js";
import { CATALOG_GENERATION_SQL } from "./generation.js";
import { type Lane, type ListingRow, withoutUnavailableTools } from "./listings.js";
import { type KeptPage, keepPage, keptPageRows, readPageRows } from "./page-cache.js";

// Catalog pages (GET /api/capabilities, /market.json, /api/catalog, /api/x402/listings) over
// listing_search, the narrow copy of the registry lane's listings kept by a trigger (migrations
// 20261127000100, …0110). Order: ts_rank for search words, then featured, then oldest; without search
// words every rank is equal, so the order is featured, then oldest (docs/catalog.md "Search rows").
// Search words rank and count at most `matchCap` matches (docs/catalog.md "Broad words"). A page is read
// as its ids, then its rows proved against the ids' snapshot (pageAndTotal), so pages are read outside
// transactions: they take a Knex, not a transaction. Each process keeps the pages it read and serves one
// again once its rows' statement proves the catalog unmoved (page-cache.ts, docs/catalog.md "Kept pages").

/** A page of one lane, in a category if asked. */
export interface LanePage {
  category?: string;
  lane: Lane;
  limit: number;
  offset: number;
  /** Per-seller cap in the featured lane. */
  featuredPerSeller: number;
}

export interface ListingSearch extends LanePage {
  search?: string;
  /** Search words: the most matches ranked and counted; past it the total is a lower bound. */
  matchCap: number;
}

export interface SearchPage {
  rows: ListingRow[];
  /** The number of matches, or `matchCap` when there are more (`totalRelation` "gte"). */
  total: number;
  /** "eq": total is exact; "gte": more listings match than were ranked (Elasticsearch's word). */
  totalRelation: "eq" | "gte";
  /**
   * The catalog generation the rows were read at (generation.ts): every column of each row but
   * last_success_at is what the database holds while the generation is still this. null when no
   * statement ran (search words with nothing to match).
   */
  generation: string | null;
}

/** Search terms → a prefix tsquery over the 'simple' vector ("doc pars" finds "document parse"). */
function tsQuery(search: string): string | undefined {
  const terms = search
    .toLowerCase()
    .split(/[^a-z0-9_]+/)
    .filter((t) => t.length > 0)
    .slice(0, 8);
  return terms.length ? terms.map((t) => `${t}:*`).join(" & ") : undefined;
}

/** Substring search on names needs trigrams: a needle under 3 characters has none and would scan all. */
const MIN_SUBSTRING_LENGTH = 3;

/**
 * A lane's rows of listing_search (alias s), in a category if asked: the spec's "Discovery visibility
 * lanes". Registry = active, review approved, verification not failed: exactly the rows listing_search
 * holds (its sync trigger, migrations/20261127000110). Search = registry with a verified or reachable
 * verdict or runtime proof (a successful call): search_lane. Featured = search, curated (featured), at
 * most featuredPerSeller per seller, the oldest first.
 */
function laneRows(q: Db, c: Pick<LanePage, "lane" | "category" | "featuredPerSeller">): Knex.QueryBuilder {
  const rows = withoutUnavailableTools(q("listing_search as s"), "s.tool_id");
  // A bare boolean, so the planner can prove the partial indexes' `where search_lane`.
  if (c.lane !== "registry") rows.whereRaw("s.search_lane");
  if (c.lane === "featured") {
    rows.whereRaw("s.featured");
    rows.whereRaw(
      `(select count(*) from listings earlier
         where earlier.featured and earlier.status = 'active'
           and earlier.seller_id is not distinct from s.seller_id
           and (earlier.created_at, earlier.id) < (s.created_at, s.listing_id)) < ?`,
      [c.featuredPerSeller],
    );
  }
  if (c.category) rows.where("s.category", c.category.toLowerCase());
  return rows;
}

/** The categories of the registry lane's listings, with how many listings each holds, most first. */
export async function categoryCounts(q: Db): Promise<{ category: string; listings: number }[]> {
  const rows = (await laneRows(q, { lane: "registry", featuredPerSeller: 0 })
    .select("s.category")
    .count({ n: "*" })
    .groupBy("s.category")
    .orderBy([
      { column: "n", order: "desc" },
      { column: "s.category", order: "asc" },
    ])) as unknown as { category: string; n: string }[];
  return rows.map((r) => ({ category: r.category, listings: Number(r.n) }));
}

/** One catalog page and the number of listings that match (exact unless search words match more than matchCap). */
export async function searchListings(q: Knex, c: ListingSearch): Promise<SearchPage> {
  return c.search ? rankedSearch(q, c, c.search) : browseListings(q, c);
}

/**
 * Search words: match, rank and count in one statement, over listing_search (about half a listing's
 * width); only the page's rows are then read in full (pageAndTotal).
 */
async function rankedSearch(q: Knex, c: ListingSearch, search: string): Promise<SearchPage> {
  const statement = searchStatement(q, c, search);
  if (!statement) return { rows: [], total: 0, totalRelation: "eq", generation: null };
  const { rows, total, generation } = await pageAndTotal(q, statement);
  return total > c.matchCap
    ? { rows, total: c.matchCap, totalRelation: "gte", generation }
    : { rows, total, totalRelation: "eq", generation };
}

/**
 * The statement of a search with words (undefined when the words hold nothing to match), with at most
 * matchCap + 1 matches ranked and counted. Ranking and an exact count must visit every match, 30–60 ms
 * for a broad word's 25,000 at 100,000 listings (docs/catalog.md "Broad words"). So `m` is planned as
 * for every match — the exact search's plan, a bitmap scan for all but the broadest words — and `cut`
 * reads it lazily: PostgreSQL runs a CTE only as far as its reader pulls, so the scan stops at the
 * (matchCap + 1)th match, in the order the scan yields them (the table's), not by rank. A LIMIT inside
 * `m` would instead let the planner pick a sequential scan that stops early, which hinges on its row
 * estimate: a word estimated broad but matching a few rows would scan the whole table.
 * test/catalog/listing-search.test.ts explains it and checks the scan stops.
 */
export function searchStatement(q: Db, c: ListingSearch, search: string): PageStatement | undefined {
  const ts = tsQuery(search);
  const needle = search.trim().toLowerCase();
  const substring =
    needle.length >= MIN_SUBSTRING_LENGTH ? `%${needle.replace(/[\\%_]/g, (m) => `\\${m}`)}%` : undefined;
  if (!ts && !substring) return undefined;
  const matches = laneRows(q, c)
    .select(
      "s.listing_id as id",
      "s.featured",
      "s.created_at",
      ts
        ? q.raw("ts_rank(s.search_vector, to_tsquery('simple', ?)) as rank", [ts])
        : q.raw("0::real as rank"),
    )
    .where((w) => {
      if (ts) w.whereRaw("s.search_vector @@ to_tsquery('simple', ?)", [ts]);
      if (substring) w.orWhereRaw("s.name_lower like ?", [substring]);
    })
    .toSQL();
  return {
    ctes: `m as materialized (${matches.sql}),
     cut as materialized (select * from m limit ?),
     ranked as (select * from cut limit ?),
     page as (select * from ranked order by rank desc, featured desc, created_at, id limit ? offset ?),
     total as (select count(*) as n from cut)`,
    bindings: [...matches.bindings, c.matchCap + 1, c.matchCap, c.limit, c.offset],
    order: "page.rank desc, page.featured desc, page.created_at, page.id",
  };
}

/**
 * No search words (the default catalog page, market.json, the machine catalogs): every row of the lane
 * matches and ranks alike, so the page is the lane in its index order (featured, then oldest: a walk of
 * listing_search_order_idx that stops after the page) and the count an index-only scan of
 * listing_search_count_idx (migrations/20261128000100), instead of ranking and sorting the whole lane
 * as a search does (~70 ms for 93,000 listings). Both in one statement; the count is exact.
 */
export async function browseListings(q: Knex, c: LanePage): Promise<SearchPage> {
  const page = laneRows(q, c)
    .select("s.listing_id as id", "s.featured", "s.created_at")
    .orderByRaw("s.featured desc, s.created_at, s.listing_id")
    .limit(c.limit)
    .offset(c.offset)
    .toSQL();
  const count = laneRows(q, c).count({ n: "*" }).toSQL();
  const found = await pageAndTotal(q, {
    ctes: `page as (${page.sql}), total as (${count.sql})`,
    bindings: [...page.bindings, ...count.bindings],
    order: "page.featured desc, page.created_at, page.id",
  });
  return { rows: found.rows, total: found.total, totalRelation: "eq", generation: found.generation };
}

/** CTEs `page` (ids and order keys) and `total` (one row, n), their bindings, and the page's order. */
export interface PageStatement {
  ctes: string;
  bindings: readonly Knex.Value[];
  order: string;
}

/**
 * The page's listing ids in order, with the total and the catalog generation of the statement's snapshot
 * (what the page's rows, and a kept page, are proved against). One row always comes back, so a page past
 * the last still carries the total.
 */
export function pageSql(s: PageStatement): string {
  return `with ${s.ctes}
     select page.id, total.n as total_matches, (${CATALOG_GENERATION_SQL}) as catalog_generation
       from total left join page on true
      order by ${s.order}`;
}

/**
 * What a page is a function of, besides the catalog: its statement and the statement's values, hashed so
 * that a kept page costs its ids and not a copy of its statement.
 */
const pageKey = (s: PageStatement): string =>
  createHash("sha256")
    .update(`${s.ctes}\u0000${s.order}\u0000${JSON.stringify(s.bindings)}`)
    .digest("base64url");

/** A page computed by its statement: ids in order, total, generation (page-cache.ts reads its rows). */
async function computePage(q: Db, s: PageStatement): Promise<KeptPage> {
  const result = await q.raw(pageSql(s), s.bindings);
  const found = result.rows as { id: string | null; total_matches: string; catalog_generation: string }[];
  return {
    generation: found[0]!.catalog_generation,
    ids: found.flatMap((r) => (r.id === null ? [] : [r.id])),
    total: Number(found[0]!.total_matches),
  };
}

/**
 * A page: kept, or computed (its ids, then its rows by the kept page's own statement). Two statements
 * instead of one that joins the page to its rows: the rows' statement is prepared once per connection
 * and its rows built by their shape, and the page's statement plans and sorts no wide rows (~0.5 ms less
 * for a hundred rows, docs/benchmarks.md "The thirty-sixth round"). The rows are proved against the
 * page's generation; when a listing was written between the two, both run again in one snapshot, where
 * the proof cannot fail. A page is kept once its rows proved it.
 */
async function pageAndTotal(q: Knex, s: PageStatement): Promise<Omit<SearchPage, "totalRelation">> {
  const key = pageKey(s);
  const kept = await keptPageRows(q, key);
  if (kept) return kept;
  const read = async (on: Db) => {
    const page = await computePage(on, s);
    const rows = await readPageRows(on, page);
    if (rows) keepPage(q, key, page);
    return rows && { rows, total: page.total, generation: page.generation };
  };
  return (
    (await read(q)) ??
    q.transaction(
      async (trx) => {
        const page = await read(trx);
        if (!page) throw new Error("catalog page: its rows moved inside one snapshot");
        return page;
      },
      { isolationLevel: "repeatable read", readOnly: true },
    )
  );
}
