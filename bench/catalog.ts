import type { Knex } from "knex";
import { overrideConfig } from "../shared/config.js";
import { closeDb } from "../shared/db/knex.js";
import { httpPageScenario, stopHttpPages } from "./catalog/http-page.js";
import { printMachine, printPlans, printResults, printSlowQueries, printTargets } from "./catalog/report.js";
import {
  aliasQueries,
  aliasScenario,
  browseScenario,
  pageJsonScenario,
  preflight,
  type Result,
  recordsScenario,
  run,
  searchQueries,
  searchScenario,
  warmUp,
  withKeptPages,
} from "./catalog/scenarios.js";
import { admin, describeData, prepare } from "./catalog/seed.js";
import { CONCURRENCY, DATABASE, LISTINGS, log, loud, SECONDS } from "./catalog/settings.js";
import { fullAggregationScenario, seedHistory, statsScenario } from "./catalog/stats.js";
import { resolvePostgresServer } from "./lib.js";

/**
 * `npm run bench:catalog`: the catalog queries at scale, called in-process through the real
 * shared/catalog/store functions against a seeded database of its own (no service, no HTTP):
 * searchListings (catalog search in the search and registry lanes, and browsing them without search
 * words: the default catalog page), findActiveByTaskAlias (the execute path's task-alias lookup),
 * readListingStats (a listing page's counters over 200,000 invocations, beside the full aggregation it
 * replaced), listingRecords (what an HTTP page adds: its facts and public records, and with them their
 * JSON), and the whole HTTP page (catalogPageJson in process, then GET /api/capabilities over loopback
 * HTTP from the API's own server, with listing records kept and not). Catalog pages are not kept between
 * calls (CATALOG_PAGE_CACHE_SIZE off) except in the scenarios named "pages kept", which measure a page
 * served again. Prints latencies, throughput, row-count sanity and the plan of the slowest query. A
 * missed target is reported, not failed: this is a measurement, not a test.
 */

let knexInstance: Knex | undefined;

async function main(): Promise<void> {
  // The HTTP scenarios' server would log every request to this report: warnings only.
  overrideConfig({ logLevel: "warn" });
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  if (!Number.isInteger(LISTINGS) || LISTINGS < 1000) throw new Error("BENCH_LISTINGS must be ≥ 1000");
  const server = await resolvePostgresServer(DATABASE);
  if (!server) {
    throw new Error("no PostgreSQL: set BENCH_DATABASE_URL or run one on 127.0.0.1:5432 (user postgres)");
  }
  const version = await admin(
    server,
    async (c) => (await c.query("show server_version")).rows[0].server_version,
  );
  printMachine(server, `PostgreSQL ${version}`);
  const knex = await prepare(server);
  knexInstance = knex;
  // The records scenario's facts are read through the process's handle (db()): the same database.
  overrideConfig({ databaseUrl: server.url(DATABASE) });
  await describeData(knex);

  const search = await searchQueries(knex);
  const aliases = await aliasQueries(knex);
  const searchLanes = [
    searchScenario(search, "search", 20),
    searchScenario(search, "search", 100),
    searchScenario(search, "registry", 20),
    searchScenario(search, "registry", 100),
  ];
  const browseLanes = [browseScenario("registry", 100), browseScenario("search", 100)];
  const alias = aliasScenario(aliases);
  const pages = await seedHistory(knex);
  const scenarios = [
    ...searchLanes,
    ...browseLanes,
    withKeptPages(searchLanes[3]!),
    withKeptPages(browseLanes[0]!),
    recordsScenario(),
    recordsScenario({ json: true }),
    pageJsonScenario({ keptRecords: false }),
    pageJsonScenario({ keptRecords: true }),
    httpPageScenario({ keptRecords: false }),
    httpPageScenario({ keptRecords: true }),
    alias,
    statsScenario(pages),
    fullAggregationScenario(pages),
  ];
  log(`queries: ${search.length} search terms, ${aliases.length} task aliases`);
  await preflight(knex, searchLanes, alias);
  for (const scenario of scenarios) await warmUp(knex, scenario);

  const results: Result[] = [];
  for (const concurrency of CONCURRENCY) {
    for (const scenario of scenarios) {
      log(`measuring ${scenario.name} at concurrency ${concurrency} for ${SECONDS} s…`);
      results.push(await run(knex, scenario, concurrency, SECONDS));
    }
  }
  log();
  printResults(results);
  printSlowQueries(results);
  printTargets(results);
  await printPlans(knex, server, results);
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`\n${signal}: stopping`);
    void (knexInstance?.destroy() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

try {
  await main();
} catch (error) {
  loud(`benchmark failed: ${(error as Error).stack ?? error}`);
  process.exitCode = 1;
} finally {
  await stopHttpPages();
  await knexInstance?.destroy();
  await closeDb();
}
