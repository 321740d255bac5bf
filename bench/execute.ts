import { freePort } from "../shared/infra/free-port.js";
import { runFallbackBench } from "./fallback.js";
import {
  echoScenarios,
  fixed,
  guardChildren,
  log,
  loud,
  type Measurement,
  measure,
  preflightEcho,
  printMachine,
  register,
  reportFailures,
  reportOutput,
  resolveInfra,
  type Service,
  startService,
  table,
  tallySince,
  waitForHealth,
  warmUp,
} from "./lib.js";

/**
 * `npm run bench:execute`: the cost of routing an echo through POST /api/execute (API → outbox →
 * BullMQ → worker → provider HTTP call → PostgreSQL → answer) against calling the echo provider
 * endpoint directly on the same service. Prints the numbers and the targets; never fails on
 * a missed target, because it is a measurement, not a test. Then the "one fallback" scenario
 * (bench/fallback.ts): the latency a failed top-ranked provider adds. BENCH_SKIP_THROUGHPUT=1 runs only
 * that scenario.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const SKIP_THROUGHPUT = process.env.BENCH_SKIP_THROUGHPUT === "1";
const CONNECTIONS = [1, 32] as const;
const WARM_UP_REQUESTS = 200;
const HEALTH_TIMEOUT_MS = 60_000;
const TARGET_OVERHEAD_MS = 3;
const TARGET_EXECUTES_PER_S = 1000;

let service: Service | undefined;

function printResults(results: Measurement[]): void {
  log("Results (latency and throughput count 200 answers only)");
  log(
    table(
      ["scenario", "connections", "p50 ms", "p99 ms", "requests/s", "non-2xx", "non-200 2xx", "errors"],
      results.map((m) => [
        m.scenario,
        String(m.connections),
        fixed(m.p50Ms),
        fixed(m.p99Ms),
        fixed(m.okPerSecond, 0),
        String(m.non2xx),
        String(m.other2xx),
        String(m.errors),
      ]),
    ),
  );
  log();
  log("CPU during each run, in cores (machine busy % is across all cores)");
  log(
    table(
      [
        "scenario",
        "connections",
        "service",
        "of it kernel",
        "service ms/req",
        "postgres",
        "redis",
        "bench client",
        "other",
        "machine busy %",
      ],
      results.map((m) => [
        m.scenario,
        String(m.connections),
        fixed(m.cpu.service),
        fixed(m.cpu.serviceSys),
        fixed((1000 * m.cpu.service) / m.okPerSecond, 3),
        fixed(m.cpu.postgres),
        fixed(m.cpu.redis),
        fixed(m.cpu.bench),
        fixed(m.cpu.other),
        fixed(m.cpu.machineBusyPct, 0),
      ]),
    ),
  );
  reportNeighbours(results);
  log();
}

/** CPU taken by processes outside the benchmark makes its numbers lower than the machine can do. */
function reportNeighbours(results: Measurement[]): void {
  for (const m of results) {
    if (m.cpu.other < 0.2) continue;
    const who =
      m.cpu.busiestOthers.map((o) => `${o.comm} ${fixed(o.cores)}`).join(", ") ||
      "short-lived processes or the kernel";
    loud(`${m.scenario} c=${m.connections}: ${fixed(m.cpu.other)} cores used outside the bench (${who})`);
  }
}

function find(results: Measurement[], scenario: string, connections: number): Measurement {
  const m = results.find((r) => r.scenario === scenario && r.connections === connections);
  if (!m) throw new Error(`no measurement for ${scenario} c=${connections}`);
  return m;
}

function printRatios(results: Measurement[], direct: string, execute: string): void {
  const d1 = find(results, direct, 1);
  const e1 = find(results, execute, 1);
  const d32 = find(results, direct, 32);
  const e32 = find(results, execute, 32);
  const overhead = e1.p50Ms - d1.p50Ms;
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  log("Measured in this run");
  log(`  router p50 overhead over direct at c=1: ${fixed(overhead)} ms (${fixed(e1.p50Ms / d1.p50Ms, 1)}×)`);
  log(`  router throughput at c=32: ${fixed(e32.okPerSecond, 0)} executes/s`);
  log(`  router/direct throughput at c=32: ${fixed(e32.okPerSecond / d32.okPerSecond, 3)}`);
  log();
  log("Targets from the issue: router p50 overhead ≤ 3 ms at c=1; ≥ 1,000 executes/s at c=32");
  log(
    `  ${verdict(overhead <= TARGET_OVERHEAD_MS)}  p50 overhead ${fixed(overhead)} ms ≤ ${TARGET_OVERHEAD_MS} ms`,
  );
  log(
    `  ${verdict(e32.okPerSecond >= TARGET_EXECUTES_PER_S)}  ${fixed(e32.okPerSecond, 0)} executes/s ≥ ` +
      `${TARGET_EXECUTES_PER_S.toLocaleString("en")}`,
  );
}

/** The echo measurements: direct against routed, at 1 and 32 connections. */
async function measureEcho(svc: Service, apiKey: string): Promise<void> {
  const { direct, execute } = echoScenarios(svc.baseUrl, apiKey);
  await preflightEcho([direct, execute]);
  for (const spec of [direct, execute]) await warmUp({ ...spec, connections: 4 }, WARM_UP_REQUESTS);

  const results: Measurement[] = [];
  for (const spec of [direct, execute]) {
    for (const connections of CONNECTIONS) {
      log(`measuring ${spec.scenario} at c=${connections} for ${SECONDS} s…`);
      results.push(await measure({ ...spec, connections, seconds: SECONDS }, svc.pid));
    }
  }
  log();
  printResults(results);
  const failed = results.map((m) => reportFailures(m)).some(Boolean);
  if (failed) {
    loud("THIS BENCHMARK SAW ERRORS: the numbers above do not describe a healthy service.");
    log();
  }
  printRatios(results, direct.scenario, execute.scenario);
  log();
}

async function run(): Promise<void> {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  const infra = await resolveInfra();
  printMachine(infra, [`${SECONDS} s per run, ${WARM_UP_REQUESTS} warm-up requests per scenario`]);
  // Loopback sellers of the fallback scenario must be callable: the public-address rule would refuse them.
  service = startService(await freePort(), { ...infra.env, OUTBOUND_ALLOWLIST: "127.0.0.1" });
  log(`starting the service (pid ${service.pid}) on ${service.baseUrl}…`);
  const startedAt = performance.now();
  await waitForHealth(service, HEALTH_TIMEOUT_MS);
  log(`healthy after ${fixed((performance.now() - startedAt) / 1000, 1)} s`);

  const apiKey = await register(service.baseUrl);
  const linesBefore = service.lineCount();
  if (SKIP_THROUGHPUT) log("BENCH_SKIP_THROUGHPUT=1: echo measurements skipped");
  else await measureEcho(service, apiKey);

  const databaseUrl = infra.env.DATABASE_URL;
  if (databaseUrl) await runFallbackBench({ baseUrl: service.baseUrl, apiKey, databaseUrl, log, loud });
  else
    loud(
      "one fallback: skipped, it inserts listings into the service's database and the embedded one's " +
        "address is not known to the bench (set BENCH_DATABASE_URL or run PostgreSQL on 127.0.0.1:5432)",
    );
  reportOutput("the service", tallySince(service, linesBefore));
}

async function main(): Promise<void> {
  guardChildren(() => (service ? [service] : []));
  try {
    await run();
  } catch (error) {
    loud(`benchmark failed: ${(error as Error).message}`);
    const tail = service?.lines() ?? [];
    if (tail.length > 0) {
      log("last lines from the service:");
      for (const line of tail.slice(-30)) log(`  ${line}`);
    }
    process.exitCode = 1;
  } finally {
    await service?.stop();
    service = undefined;
  }
  // Keep-alive sockets and timers from the load generator must not hold the process open.
  process.exit(process.exitCode ?? 0);
}

await main();
