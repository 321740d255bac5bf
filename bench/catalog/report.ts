import os from "node:os";
import type { Knex } from "knex";
import { getConfig } from "../../shared/config.js";
import { fixed, type PostgresServer, table, withPgClient } from "../lib.js";
import type { PerQuery, Result, Scenario } from "./scenarios.js";
import {
  DATABASE,
  LISTINGS,
  log,
  POOL_MAX,
  SECONDS,
  TARGET_LISTINGS,
  TARGET_P50_MS,
  TARGET_P99_MS,
} from "./settings.js";

// What is printed: machine, latency tables, slowest queries, targets and query plans.

// Output

export function printMachine(server: PostgresServer, version: string): void {
  const cpus = os.cpus();
  log("Machine");
  log(`  cpus: ${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown"}`);
  log(`  memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`);
  log(`  node: ${process.version}`);
  log(`  postgres: ${server.label}/${DATABASE}, ${version}`);
  log(`  knex pool max ${POOL_MAX}; ${SECONDS} s per run; every query once as warm-up`);
  log(
    `  search ranks and counts at most ${getConfig().catalogSearchMatchCap} matches (CATALOG_SEARCH_MATCH_CAP; "capped %": searches past it)`,
  );
  log();
}

export function printResults(results: Result[]): void {
  log("Results (in-process calls of the shared/catalog/store functions; ms per call)");
  log(
    table(
      [
        "scenario",
        "concurrency",
        "queries",
        "calls",
        "p50 ms",
        "p99 ms",
        "max ms",
        "calls/s",
        "avg rows",
        "0 rows %",
        "capped %",
      ],
      results.map((r) => [
        r.scenario.name,
        String(r.concurrency),
        String(r.scenario.queries.length),
        String(r.calls),
        fixed(r.p50Ms),
        fixed(r.p99Ms),
        fixed(r.maxMs),
        fixed(r.callsPerSecond, 0),
        fixed(r.avgRows, 1),
        fixed(r.zeroRowPct, 1),
        fixed(r.cappedPct, 1),
      ]),
    ),
  );
  log();
}

export function slowestQueries(r: Result, n: number): [string, PerQuery][] {
  return [...r.perQuery].sort((a, b) => b[1].totalMs / b[1].calls - a[1].totalMs / a[1].calls).slice(0, n);
}

export function printSlowQueries(results: Result[]): void {
  log("Slowest queries at concurrency 1 (mean over their calls)");
  for (const r of results.filter((x) => x.concurrency === 1)) {
    log(`  ${r.scenario.name}:`);
    for (const [query, s] of slowestQueries(r, 5)) {
      log(
        `    ${fixed(s.totalMs / s.calls)} ms mean, ${fixed(s.maxMs)} max, ${s.rows} rows of ${s.total} matches, ` +
          `${s.calls} calls: ${JSON.stringify(query)}`,
      );
    }
  }
  log();
}

export function printTargets(results: Result[]): void {
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  log(
    `Targets: p50 ≤ ${TARGET_P50_MS} ms and p99 ≤ ${TARGET_P99_MS} ms for both at ` +
      `${TARGET_LISTINGS.toLocaleString("en")} listings (concurrency 1)`,
  );
  if (LISTINGS !== TARGET_LISTINGS) {
    log(`  (this run has ${LISTINGS.toLocaleString("en")} listings: indicative only)`);
  }
  for (const r of results.filter((x) => x.concurrency === 1)) {
    log(
      `  ${verdict(r.p50Ms <= TARGET_P50_MS)}  ${r.scenario.name}: p50 ${fixed(r.p50Ms)} ms ≤ ${TARGET_P50_MS} ms`,
    );
    log(
      `  ${verdict(r.p99Ms <= TARGET_P99_MS)}  ${r.scenario.name}: p99 ${fixed(r.p99Ms)} ms ≤ ${TARGET_P99_MS} ms`,
    );
  }
  log();
}

/** The SQL and bindings a call issues, captured from knex's query event. */
export async function captureSql(knex: Knex, scenario: Scenario, query: string) {
  const seen: { sql: string; bindings: readonly unknown[] }[] = [];
  const listener = (data: { sql: string; bindings?: readonly unknown[] }) =>
    seen.push({ sql: data.sql, bindings: data.bindings ?? [] });
  knex.on("query", listener);
  try {
    await scenario.call(knex, query);
  } finally {
    knex.off("query", listener);
  }
  return seen;
}

export async function explain(
  knex: Knex,
  server: PostgresServer,
  scenario: Scenario,
  query: string,
  why: string,
) {
  const statements = await captureSql(knex, scenario, query);
  await withPgClient(server.url(DATABASE), async (client) => {
    for (const { sql, bindings } of statements) {
      log(`EXPLAIN (ANALYZE, BUFFERS) — ${scenario.name}, ${why}: ${JSON.stringify(query)}`);
      log(`  bindings: ${JSON.stringify(bindings)}`);
      log(`  ${sql.replace(/\s+/g, " ")}`);
      const plan = await client.query(`explain (analyze, buffers) ${sql}`, bindings as unknown[]);
      for (const row of plan.rows as { "QUERY PLAN": string }[]) log(`    ${row["QUERY PLAN"]}`);
      log();
    }
  });
}

export async function printPlans(knex: Knex, server: PostgresServer, results: Result[]): Promise<void> {
  const sequential = results.filter((r) => r.concurrency === 1);
  const slowest = sequential.reduce((a, b) => (b.p99Ms > a.p99Ms ? b : a));
  log(`Plans for the slowest scenario by p99 at concurrency 1: ${slowest.scenario.name}`);
  log();
  const [worst] = slowestQueries(slowest, 1);
  if (worst) await explain(knex, server, slowest.scenario, worst[0], "its slowest query");
  // A typical query too: the one whose mean is closest to the scenario's p50.
  const typical = [...slowest.perQuery].sort(
    (a, b) =>
      Math.abs(a[1].totalMs / a[1].calls - slowest.p50Ms) -
      Math.abs(b[1].totalMs / b[1].calls - slowest.p50Ms),
  )[0];
  if (typical && typical[0] !== worst?.[0]) {
    await explain(knex, server, slowest.scenario, typical[0], "a typical query (mean ≈ p50)");
  }
}
