import os from "node:os";
import { freePort } from "../shared/infra/free-port.js";
import { runFallbackBench } from "./fallback.js";
import {
  fixed,
  type Infra,
  type LoadSpec,
  type Measurement,
  measure,
  postJson,
  resolveInfra,
  type Service,
  startService,
  table,
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
const MESSAGE = "bench";

let service: Service | undefined;

function log(message = ""): void {
  process.stdout.write(`${message}\n`);
}

function loud(message: string): void {
  log(`!!!!! ${message}`);
}

/** Kills the child however the bench ends: normal exit, thrown error or Ctrl-C. */
function guardChild(): void {
  process.on("exit", () => service?.killNow());
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      log(`\n${signal}: stopping the service`);
      void (service?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
    });
  }
}

function printMachine(infra: Infra): void {
  const cpus = os.cpus();
  log("Machine");
  log(`  cpus: ${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown"}`);
  log(`  memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`);
  log(`  node: ${process.version}`);
  log(`  postgres: ${infra.postgres}`);
  log(`  redis: ${infra.redis}`);
  log(
    `  EXECUTIONS_CONCURRENCY=${process.env.EXECUTIONS_CONCURRENCY ?? "default"}, ` +
      `DATABASE_POOL_MAX=${process.env.DATABASE_POOL_MAX ?? "default"}`,
  );
  log(`  ${SECONDS} s per run, ${WARM_UP_REQUESTS} warm-up requests per scenario`);
  log();
}

async function register(baseUrl: string): Promise<string> {
  const res = await postJson(`${baseUrl}/api/quickstart`, { name: "bench-agent", intent: "buyer" });
  if (res.status !== 201 || typeof res.json?.api_key !== "string") {
    throw new Error(`POST /api/quickstart answered ${res.status}: ${JSON.stringify(res.json)}`);
  }
  return res.json.api_key;
}

/** One request of each kind before any load, so a broken path fails with its own error message. */
async function preflight(direct: Omit<LoadSpec, "seconds">, execute: Omit<LoadSpec, "seconds">) {
  for (const spec of [direct, execute]) {
    const res = await postJson(spec.url, JSON.parse(spec.body), spec.headers);
    const echoed = res.json?.output?.echo?.message;
    if (res.status !== 200 || echoed !== MESSAGE) {
      throw new Error(`${spec.scenario}: answered ${res.status}: ${JSON.stringify(res.json).slice(0, 600)}`);
    }
  }
}

function scenarios(baseUrl: string, apiKey: string) {
  const json = { "content-type": "application/json" };
  const direct = {
    scenario: "direct POST /api/tools/echo",
    url: `${baseUrl}/api/tools/echo`,
    headers: json,
    body: JSON.stringify({ input: { message: MESSAGE } }),
    connections: 1,
  };
  const execute = {
    scenario: "router POST /api/execute",
    url: `${baseUrl}/api/execute`,
    headers: { ...json, authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ task: "echo", input: { message: MESSAGE } }),
    connections: 1,
  };
  return { direct, execute };
}

function reportFailures(m: Measurement): boolean {
  const bad = m.non2xx + m.other2xx + m.errors;
  if (bad === 0) return false;
  loud(
    `${m.scenario} c=${m.connections}: ${m.non2xx} non-2xx, ${m.other2xx} non-200 2xx (e.g. 202 pending), ` +
      `${m.errors} errors (${m.timeouts} timeouts); status codes ${JSON.stringify(m.statusCodes)}`,
  );
  for (const sample of m.errorSamples) loud(`  error: ${sample}`);
  return true;
}

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
  const { direct, execute } = scenarios(svc.baseUrl, apiKey);
  await preflight(direct, execute);
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
  const failed = results.map(reportFailures).some(Boolean);
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
  printMachine(infra);
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
  reportServiceOutput(service, linesBefore);
}

/**
 * The service logs at warn, so anything it printed during the runs deserves to be seen. Repeated
 * lines are counted rather than printed again.
 */
function reportServiceOutput(svc: Service, linesBefore: number): void {
  const during = svc.lineCount() - linesBefore;
  if (during === 0) return;
  const counts = new Map<string, number>();
  for (const line of svc.lines().slice(-during)) {
    const text = line.replace(/^\(node:\d+\) /, "").slice(0, 400);
    counts.set(text, (counts.get(text) ?? 0) + 1);
  }
  log();
  loud(`the service logged ${during} warning/error line(s) during the runs (distinct, most frequent first):`);
  const distinct = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 10);
  for (const [text, n] of distinct) log(`  ${n}× ${text}`);
}

async function main(): Promise<void> {
  guardChild();
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
