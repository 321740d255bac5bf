import type { Knex } from "knex";
import {
  browseListings,
  catalogPageJson,
  findActiveByTaskAlias,
  type Lane,
  type LanePage,
  type ListingSearch,
  listingRecords,
  searchListings,
} from "../../shared/catalog/index.js";
import { getConfig, overrideConfig } from "../../shared/config.js";
import type { GateReading } from "../../shared/money/index.js";
import { percentile } from "../lib.js";
import { between, pick, rng, shuffled } from "./random.js";
import { loud } from "./settings.js";
import { ACTIONS, CATEGORIES, CATEGORY_NAMES, MODIFIERS, NAME_WORDS, TAGS } from "./vocabulary.js";

// What is measured: the query lists drawn from the seeded data, the scenarios and the timed runs.

// Query lists

/** Nonsense that matches nothing, so a miss's cost is measured too. */
export const MISSES = [
  "xqzv",
  "florbnication",
  "zzyzx quux",
  "plumbus grommet",
  "qwxkj",
  "nonexistentword",
  "vorpal snicker",
  "xylograph",
  "jabberwock",
  "fnord",
] as const;

/** Short terms agents really type: prefix matches on them are large, and trigrams cannot help. */
export const SHORT = ["ai", "ml", "ocr", "seo", "pii", "llm", "api", "bot", "qr", "gpt"] as const;

/** The terms whose absence from results would mean the search index or query is broken. */
export const COMMON = ["pdf", "extractor", "scraper", "classifier", "documents", "web"] as const;

export async function searchQueries(knex: Knex): Promise<string[]> {
  const rand = rng(1001);
  const names = (
    await knex.raw("select lower(name) as name from listings order by md5(slug) limit 65")
  ).rows.map((r: { name: string }) => r.name) as string[];
  const words = [...NAME_WORDS];
  const out: string[] = [];
  // 40 whole words: the commonest of each kind, then a spread over the vocabulary.
  out.push(...ACTIONS.slice(0, 6), ...MODIFIERS.slice(0, 5), ...CATEGORIES.slice(0, 4).map(([, o]) => o[0]!));
  while (out.length < 40) out.push(pick(rand, words));
  // 50 two-word prefixes as typed into a search box ("pdf extr").
  for (const name of names.slice(0, 50)) {
    const [first, second] = name.split(" ");
    out.push(second ? `${first} ${second.slice(0, Math.max(3, Math.ceil(second.length * 0.6)))}` : first!);
  }
  // 15 whole names.
  out.push(...names.slice(50, 65));
  out.push(...CATEGORY_NAMES);
  for (let i = 0; i < 25; i++) out.push(pick(rand, TAGS));
  // 20 single-word prefixes ("summ", "tran").
  for (let i = 0; i < 20; i++) {
    const word = pick(
      rand,
      words.filter((w) => w.length >= 6),
    );
    out.push(word.slice(0, between(rand, 3, 5)));
  }
  out.push(...SHORT, ...MISSES);
  return out;
}

export async function aliasQueries(knex: Knex): Promise<string[]> {
  const column = async (sql: string) => (await knex.raw(sql)).rows.map((r: { v: string }) => r.v) as string[];
  const slugs = await column("select slug as v from listings order by md5(slug || 'alias') limit 200");
  const names = await column(
    "select v from (select distinct lower(name) as v from listings) n order by md5(v) limit 150",
  );
  const commonTags = await column(
    "select t as v from listings, unnest(tags) t group by t order by count(*) desc, t limit 50",
  );
  const anyTags = await column(
    "select v from (select distinct t as v from listings, unnest(tags) t) t order by md5(v) limit 50",
  );
  return [
    ...slugs,
    ...names,
    ...commonTags,
    ...anyTags,
    ...CATEGORY_NAMES,
    ...MISSES,
    ...SHORT,
    "echo",
    "no-such-task",
  ];
}

// Measurement

export interface Scenario {
  name: string;
  queries: readonly string[];
  /**
   * Runs one query; answers how many rows came back, how many matched in all, and whether more matched
   * than search ranks (the catalog's match cap: then total is that cap).
   */
  call(knex: Knex, query: string): Promise<{ rows: number; total: number; capped?: boolean }>;
  /**
   * Catalog pages kept between calls (shared/catalog/store/page-cache.ts). Off for every other
   * scenario, which measures the statements themselves: the same queries repeat within a run.
   */
  keptPages?: boolean;
  /** Listing records kept as JSON between calls (CATALOG_RECORD_CACHE_SIZE); off unless set. */
  keptRecords?: boolean;
}

/** CATALOG_PAGE_CACHE_SIZE as configured, read before the bench turns it off. */
const KEPT_PAGES = getConfig().catalogPageCacheSize || 1000;

/** The scenario with catalog pages kept: its calls after the warm-up are served from kept pages. */
export function withKeptPages(scenario: Scenario): Scenario {
  return { ...scenario, name: `${scenario.name}, pages kept`, keptPages: true };
}

/**
 * Records kept by the scenario that keeps them: as configured, and at least every record of the
 * browse pages it reads (31 pages of 100 at the bench's scale), so that it measures records kept, not
 * the least recently used going out.
 */
export const KEPT_RECORDS = Math.max(getConfig().catalogRecordCacheSize, 4000);

/** Runs `work` with pages and records kept only for a scenario that keeps them. */
async function withPageCache<T>(scenario: Scenario, work: () => Promise<T>): Promise<T> {
  overrideConfig({
    catalogPageCacheSize: scenario.keptPages ? KEPT_PAGES : 0,
    catalogRecordCacheSize: scenario.keptRecords ? KEPT_RECORDS : 0,
  });
  try {
    return await work();
  } finally {
    overrideConfig({ catalogPageCacheSize: 0, catalogRecordCacheSize: 0 });
  }
}

export interface PerQuery {
  calls: number;
  totalMs: number;
  maxMs: number;
  rows: number;
  total: number;
}

export interface Result {
  scenario: Scenario;
  concurrency: number;
  calls: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  callsPerSecond: number;
  avgRows: number;
  zeroRowPct: number;
  cappedPct: number;
  perQuery: Map<string, PerQuery>;
}

export function searchScenario(queries: readonly string[], lane: Lane, limit: number): Scenario {
  return {
    name: `search lane=${lane} limit=${limit}`,
    queries,
    async call(knex, search) {
      const query: ListingSearch = {
        search,
        lane,
        limit,
        offset: 0,
        featuredPerSeller: 3,
        matchCap: getConfig().catalogSearchMatchCap,
      };
      const { rows, total, totalRelation } = await searchListings(knex, query);
      return { rows: rows.length, total, capped: totalRelation === "gte" };
    },
  };
}

/** Browsing a lane without search words (the default catalog page, market.json), whole or by category. */
export function browseScenario(lane: Lane, limit: number): Scenario {
  return {
    name: `browse lane=${lane} limit=${limit}`,
    queries: [ALL_CATEGORIES, ...CATEGORY_NAMES],
    async call(knex, category) {
      const { rows, total } = await browsePage(knex, lane, limit, category);
      return { rows: rows.length, total };
    },
  };
}

/** One browse page of a lane: every category (ALL_CATEGORIES) or one. */
function browsePage(knex: Knex, lane: Lane, limit: number, category: string) {
  const query: LanePage = {
    category: category === ALL_CATEGORIES ? undefined : category,
    lane,
    limit,
    offset: 0,
    featuredPerSeller: 3,
  };
  return browseListings(knex, query);
}

const ALL_CATEGORIES = "(every category)";

/** A closed paid gate, as a deployment without a settlement signer reads it: records need no chain. */
const CLOSED_GATE: GateReading = {
  enabled: false,
  reason: "settlement_signer_not_configured",
  custody: null,
  authorityReadOk: true,
  rail: { configured: false, rpc_ok: null, chain_id: null, signer: false },
};

/**
 * A scenario over the registry lane's browse pages at limit 100 with pages kept (the store's share is a
 * kept page's read, ~1 ms), and listing records kept too when `keptRecords`: the shape of every scenario
 * that measures what a catalog page costs above its rows.
 */
export function registryPagesScenario(label: string, keptRecords: boolean, call: Scenario["call"]): Scenario {
  return {
    name: `${label}, browse lane=registry limit=100, pages kept${keptRecords ? ", records kept" : ""}`,
    queries: browseScenario("registry", 100).queries,
    keptPages: true,
    keptRecords,
    call,
  };
}

/**
 * What an HTTP catalog page adds to its listings: the page's facts (listing stats, sellers, health,
 * read in parallel) and its public records (listingRecords). With `json`, the records are also encoded
 * as the response's JSON (Koa's JSON.stringify of the body); HTTP itself is not included. listingRecords
 * reads through the process's database handle (db()), which the bench points at its own database.
 */
export function recordsScenario(options: { json?: boolean } = {}): Scenario {
  return registryPagesScenario(`records${options.json ? " as JSON" : ""}`, false, async (knex, category) => {
    const { rows, total } = await browsePage(knex, "registry", 100, category);
    const records = await listingRecords(rows, CLOSED_GATE);
    if (options.json) JSON.stringify({ capabilities: records });
    return { rows: rows.length, total };
  });
}

/**
 * The HTTP catalog page's body as GET /api/capabilities makes it (catalogPageJson: the page, its facts,
 * the paid gate and availability, the records' JSON and the page's, as the parts api/mount.ts writes);
 * with `keptRecords`, records kept between calls where their facts prove them current
 * (shared/catalog/record-cache.ts), else every record built and encoded. HTTP itself is not included.
 * Reads through the process's database handle (db()), pointed at the bench's database.
 */
export function pageJsonScenario(options: { keptRecords: boolean }): Scenario {
  return registryPagesScenario("page as JSON", options.keptRecords, async (_knex, category) => {
    const page = await catalogPageJson({
      visibility: "registry",
      limit: 100,
      category: categoryOf(category),
    });
    return pageCounts(page.parts[page.parts.length - 1]!.toString(), 100);
  });
}

/**
 * A catalog page's row count and total, from its JSON's end (the total follows the records): at offset 0
 * a page holds min(total, limit) records.
 */
export function pageCounts(tail: string, limit: number): { rows: number; total: number } {
  const total = Number(/\],"total":(\d+),"total_relation"/.exec(tail)?.[1]);
  return { rows: Math.min(total, limit), total };
}

/** The category a browse scenario's query names, as the catalog query takes it. */
export const categoryOf = (query: string) => (query === ALL_CATEGORIES ? undefined : query);

export function aliasScenario(queries: readonly string[]): Scenario {
  return {
    name: "alias findActiveByTaskAlias",
    queries,
    async call(knex, alias) {
      const rows = (await findActiveByTaskAlias(knex, alias)).length;
      return { rows, total: rows };
    },
  };
}

/** Calls the scenario's queries in a fixed shuffled order, `concurrency` at a time, for `seconds`. */
export function run(knex: Knex, scenario: Scenario, concurrency: number, seconds: number): Promise<Result> {
  return withPageCache(scenario, () => timedRun(knex, scenario, concurrency, seconds));
}

async function timedRun(
  knex: Knex,
  scenario: Scenario,
  concurrency: number,
  seconds: number,
): Promise<Result> {
  const order = shuffled(rng(concurrency * 7919), scenario.queries);
  const latencies: number[] = [];
  const perQuery = new Map<string, PerQuery>();
  let next = 0;
  let rowsTotal = 0;
  let zeroRows = 0;
  let capped = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      const query = order[next++ % order.length]!;
      const t0 = performance.now();
      const { rows, total, capped: wasCapped } = await scenario.call(knex, query);
      const ms = performance.now() - t0;
      latencies.push(ms);
      rowsTotal += rows;
      if (rows === 0) zeroRows += 1;
      if (wasCapped) capped += 1;
      const stats = perQuery.get(query) ?? { calls: 0, totalMs: 0, maxMs: 0, rows, total };
      stats.calls += 1;
      stats.totalMs += ms;
      stats.maxMs = Math.max(stats.maxMs, ms);
      perQuery.set(query, stats);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsed = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    scenario,
    concurrency,
    calls: latencies.length,
    seconds: elapsed,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted[sorted.length - 1] ?? Number.NaN,
    callsPerSecond: latencies.length / elapsed,
    avgRows: rowsTotal / Math.max(1, latencies.length),
    zeroRowPct: (100 * zeroRows) / Math.max(1, latencies.length),
    cappedPct: (100 * capped) / Math.max(1, latencies.length),
    perQuery,
  };
}

/** Every query once, sequentially: warms the pool, the JIT and PostgreSQL's buffers. */
export async function warmUp(knex: Knex, scenario: Scenario): Promise<void> {
  await withPageCache(scenario, async () => {
    for (const query of scenario.queries) await scenario.call(knex, query);
  });
}

export async function preflight(knex: Knex, searchLanes: Scenario[], alias: Scenario): Promise<void> {
  const broken: string[] = [];
  for (const scenario of searchLanes) {
    for (const term of COMMON) {
      if ((await scenario.call(knex, term)).rows === 0) broken.push(`${scenario.name} "${term}"`);
    }
    for (const term of MISSES) {
      const { rows } = await scenario.call(knex, term);
      if (rows > 0) loud(`${scenario.name}: the miss "${term}" returned ${rows} rows`);
    }
  }
  for (const alias_ of ["pdf", "documents", "echo"]) {
    if ((await alias.call(knex, alias_)).rows === 0) broken.push(`${alias.name} "${alias_}"`);
  }
  if (broken.length > 0) {
    throw new Error(
      `no rows for common terms, so the index or the query is broken: ${broken.join(", ")}. ` +
        "The numbers would be meaningless.",
    );
  }
}
