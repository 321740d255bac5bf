import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { freePort } from "../shared/infra/free-port.js";
import { findProfile, monotonicMicros, summariseProfile } from "./execute/cpu-profile.js";
import { HEAP_HOOK, summariseHeapProfile } from "./execute/heap-profile.js";
import { PAID_PRICE_USDC, retirePaidListings, setUpPaid } from "./execute/paid.js";
import { type Floor, type Peer, preflightChat, startFloor, startPeer } from "./execute/peer.js";
import {
  type Group,
  type InterleavedRound,
  type Pair,
  printInterleaved,
  printRatios,
  printResults,
  type Result,
} from "./execute/report.js";
import { countRoundTrips } from "./execute/round-trips.js";
import { criticalPath, paidCriticalPath, printCriticalPath, TIMELINE_HOOK } from "./execute/timeline.js";
import { runFallbackBench } from "./fallback.js";
import {
  AutovacuumStandIn,
  drainExecutions,
  ECHO_MESSAGE,
  type EchoSpec,
  echoScenarios,
  fixed,
  type LoadSpec,
  log,
  loud,
  type Measurement,
  measure,
  measureGroups,
  preflightEcho,
  printMachine,
  register,
  reportFailures,
  reportOutput,
  resetCircuits,
  resolveInfra,
  runBench,
  type Service,
  sleep,
  startService,
  tallySince,
  vacuumAnalyzeDatabase,
  waitForHealth,
  warmUp,
} from "./lib.js";

/**
 * `npm run bench:execute`: what routing costs, against a peer, in one run. Back to back at c=1 and
 * c=32: the Portkey OSS gateway proxying to a fake OpenAI-style provider (and that provider called
 * directly), our first-party echo called directly and through POST /api/execute (free) on the default
 * all-in-one service, then a paid execute on the dev chain's ledger path (and its loopback seller called
 * directly) on a second all-in-one service with DEV_CHAIN=1, started after the free runs. Prints one table,
 * the CPU of each process group, the overheads and the targets; then round trips per execute
 * (bench/execute/round-trips.ts) and the "one fallback" scenario (bench/fallback.ts). Never fails on a
 * missed target: it is a measurement, not a test.
 *
 * BENCH_SECONDS (default 10) per run; BENCH_DATABASE / BENCH_QUEUE_PREFIX (default agentmarket_bench,
 * {ambench}) place it beside another checkout's run; BENCH_SKIP_THROUGHPUT=1 runs only the fallback scenario;
 * BENCH_ROUND_TRIPS=0 skips the counting; BENCH_PEER_ROUNDS (default 3) more rounds of the free execute and
 * the peer, interleaved; BENCH_CPU_PROFILE=1 profiles the service under the free execute
 * alone (the paid one with BENCH_PROFILE_PAID=1), at c=32 or BENCH_PROFILE_CONNECTIONS
 * (bench/execute/cpu-profile.ts); BENCH_HEAP_PROFILE=1 prints what the service allocated per execute
 * there instead, and where (bench/execute/heap-profile.ts); BENCH_TIMELINE=1 prints the free execute's critical path at c=1
 * (the paid one's with BENCH_PROFILE_PAID=1), segment by segment, stamped inside the service
 * (bench/execute/timeline.ts).
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const SKIP_THROUGHPUT = process.env.BENCH_SKIP_THROUGHPUT === "1";
const COUNT_ROUND_TRIPS = process.env.BENCH_ROUND_TRIPS !== "0";
const CPU_PROFILE = process.env.BENCH_CPU_PROFILE === "1";
const PROFILE_CONNECTIONS = Number(process.env.BENCH_PROFILE_CONNECTIONS ?? 32);
const PROFILE_PAID = process.env.BENCH_PROFILE_PAID === "1";
const TIMELINE = process.env.BENCH_TIMELINE === "1";
const HEAP_PROFILE = process.env.BENCH_HEAP_PROFILE === "1";
const CONNECTIONS = [1, 32] as const;
/** More rounds of the free execute against the peer, interleaved (measureInterleaved). */
const PEER_ROUNDS = Number(process.env.BENCH_PEER_ROUNDS ?? 3);
/**
 * Per scenario, at c=4, before any is measured. V8 moves a function to its optimising compiler only
 * after thousands of calls, and an execute runs far more of them than a proxied request: with 200 the
 * first c=1 row measured part of the service's warm-up (p99 13–16 ms there, 6.5–8.4 ms in the same
 * run's interleaved rounds). The peer gets the same.
 */
const WARM_UP_REQUESTS = 2000;
/** Free executes run on the paid rows' service before its own warm-up. */
const PAID_SERVICE_WARM_UP = 2000;
const HEALTH_TIMEOUT_MS = 90_000;
const COUNT_FREE = 200;
const COUNT_PAID = 100;

const children: Service[] = [];
/** Autovacuum's work before each measured run, on a server that runs without it (AutovacuumStandIn). */
let standIn: AutovacuumStandIn | undefined;

/**
 * measureGroups, after what autovacuum would have done by now, with the service's threads apart;
 * `label` is logged as it starts.
 */
async function measureRun(
  label: string,
  spec: LoadSpec | readonly LoadSpec[],
  groups: Record<Group, number[]>,
): Promise<Result> {
  await standIn?.catchUp();
  log(label);
  return measureGroups(spec, groups, { threadsOf: groups.service[0] });
}

/** Every scenario, c=1 then c=32, so that each routed run and its direct call are back to back. */
async function measureAll(specs: readonly EchoSpec[], groups: Record<Group, number[]>): Promise<Result[]> {
  for (const spec of specs) await warmUp({ ...spec, connections: 4 }, WARM_UP_REQUESTS);
  const results: Result[] = [];
  for (const connections of CONNECTIONS) {
    for (const spec of specs) {
      const label = `measuring ${spec.scenario} at c=${connections} for ${SECONDS} s…`;
      results.push(await measureRun(label, { ...spec, connections, seconds: SECONDS }, groups));
    }
  }
  log();
  return results;
}

/**
 * The paid execute at c=32 spread over PAID_BUYERS buyers, the connections shared out evenly: against the
 * one-buyer row, what that buyer's own rows (accounts, daily spend) cost at c=32, apart from the fee
 * account that every capture shares.
 */
async function measurePaidSpread(
  specs: readonly EchoSpec[],
  groups: Record<Group, number[]>,
): Promise<Result> {
  const connections = CONNECTIONS.at(-1)!;
  // Shared out so that they sum to c=32, whatever the number of buyers (the report looks the row up at it).
  const share = (i: number) =>
    Math.floor(connections / specs.length) + (i < connections % specs.length ? 1 : 0);
  for (const spec of specs) await warmUp({ ...spec, connections: 1 }, 50);
  const label = `measuring ${specs[0]!.scenario} at c=${connections} for ${SECONDS} s…`;
  const result = await measureRun(
    label,
    specs.map((spec, i) => ({ ...spec, connections: share(i), seconds: SECONDS })),
    groups,
  );
  log();
  return result;
}

/**
 * BENCH_PEER_ROUNDS more rounds of the peer and the free execute, each at c=1 (with both direct calls,
 * for the overheads) and at c=32, the side that runs first alternating: on a machine whose speed drifts
 * within a run, a ratio of two runs minutes apart measures the drift as much as the code.
 */
async function measureInterleaved(
  peer: { direct: EchoSpec; routed: EchoSpec },
  ours: { direct: EchoSpec; routed: EchoSpec },
  groups: Record<Group, number[]>,
  floor?: EchoSpec,
): Promise<InterleavedRound[]> {
  const rounds: InterleavedRound[] = [];
  const run = (spec: EchoSpec, connections: number) => {
    const label = `measuring ${spec.scenario} at c=${connections} for ${SECONDS} s (round ${rounds.length + 1})…`;
    return measureRun(label, { ...spec, connections, seconds: SECONDS }, groups);
  };
  for (let i = 0; i < PEER_ROUNDS; i++) {
    const first = i % 2 === 0 ? "ours" : "peer";
    const order = first === "ours" ? (["ours", "peer"] as const) : (["peer", "ours"] as const);
    const specs = { ours, peer };
    const c1: Partial<Record<"ours" | "peer", { direct: Result; routed: Result; floor?: Result }>> = {};
    for (const side of order) {
      const direct = await run(specs[side].direct, 1);
      const routed = await run(specs[side].routed, 1);
      // The floor proxies to the peer's fake provider: measured in the peer's phase, beside its direct call.
      c1[side] = { direct, routed, floor: side === "peer" && floor ? await run(floor, 1) : undefined };
    }
    const c32: Partial<Record<"ours" | "peer", Result>> = {};
    for (const side of order) c32[side] = await run(specs[side].routed, 32);
    rounds.push({
      first,
      oursDirect: c1.ours!.direct,
      oursRouted: c1.ours!.routed,
      peerDirect: c1.peer!.direct,
      peerRouted: c1.peer!.routed,
      floor: c1.peer!.floor,
      oursRouted32: c32.ours!,
      peerRouted32: c32.peer!,
    });
  }
  log();
  return rounds;
}

async function startBenchService(env: Record<string, string>, nodeArgs: string[] = []): Promise<Service> {
  const service = startService(await freePort(), env, undefined, nodeArgs);
  children.push(service);
  log(`starting the service (pid ${service.pid}) on ${service.baseUrl}…`);
  const startedAt = performance.now();
  await waitForHealth(service, HEALTH_TIMEOUT_MS);
  log(`healthy after ${fixed((performance.now() - startedAt) / 1000, 1)} s`);
  return service;
}

/**
 * A service for a profile: started with `nodeArgs`, a buyer registered, and the execute to profile (the
 * free one, or with BENCH_PROFILE_PAID=1 the paid one, on the dev chain's ledger path and the upstream's
 * loopback seller: `peer`'s, when the caller started it first), warmed up, the database vacuumed. With
 * it, the direct call the execute wraps (the echo, or the seller).
 */
async function serviceToProfile(
  env: Record<string, string>,
  nodeArgs: string[],
  peer?: Peer,
): Promise<{ service: Service; execute: EchoSpec; direct: EchoSpec }> {
  const chain: Record<string, string> = PROFILE_PAID ? { DEV_CHAIN: "1", DEV_CHAIN_PORT: "0" } : {};
  const service = await startBenchService({ ...env, ...chain }, nodeArgs);
  const apiKey = await register(service.baseUrl);
  let { execute, direct } = echoScenarios(service.baseUrl, apiKey);
  if (PROFILE_PAID) {
    if (!env.DATABASE_URL)
      throw new Error("BENCH_PROFILE_PAID=1 needs the database's address (BENCH_DATABASE_URL)");
    const seller = peer ?? (await startPeer((child) => children.push(child)));
    ({ execute, direct } = await setUpPaid(service.baseUrl, env.DATABASE_URL, seller.sellerUrl));
  } else await preflightEcho([direct, execute]);
  await warmUp({ ...execute, connections: 4 }, WARM_UP_REQUESTS);
  if (env.DATABASE_URL) await vacuumAnalyzeDatabase(env.DATABASE_URL);
  return { service, execute, direct };
}

/** After a profiled execute's load: its runs left in the queue drained, the paid listing retired. */
async function tidyAfterProfile(env: Record<string, string>): Promise<void> {
  if (env.REDIS_URL) await drainExecutions(env);
  if (PROFILE_PAID && env.DATABASE_URL) await retirePaidListings(env.DATABASE_URL);
}

/** Measures the profiled execute at c=BENCH_PROFILE_CONNECTIONS, prints its figures, and tidies up after. */
async function measureProfiled(
  env: Record<string, string>,
  service: Service,
  execute: EchoSpec,
): Promise<Measurement> {
  log(`profiling ${execute.scenario} at c=${PROFILE_CONNECTIONS} for ${SECONDS} s…`);
  const m = await measure({ ...execute, connections: PROFILE_CONNECTIONS, seconds: SECONDS }, service.pid);
  log(
    `  ${fixed(m.okPerSecond, 0)} executes/s, p50 ${fixed(m.p50Ms)} ms, p99 ${fixed(m.p99Ms)} ms, ` +
      `service ${fixed(m.cpu.service)} cores`,
  );
  reportFailures(m);
  await tidyAfterProfile(env);
  return m;
}

/**
 * BENCH_CPU_PROFILE=1: the execute to profile (serviceToProfile) at c=BENCH_PROFILE_CONNECTIONS
 * (default 32), under --cpu-prof, summarised over its window.
 */
async function runProfile(env: Record<string, string>): Promise<void> {
  const dir = mkdtempSync(join(os.tmpdir(), "agentmarket-cpu-prof-"));
  const { service, execute } = await serviceToProfile(env, ["--cpu-prof", `--cpu-prof-dir=${dir}`]);
  const from = monotonicMicros();
  await measureProfiled(env, service, execute);
  const to = monotonicMicros();
  log("stopping the service with SIGTERM so that it writes its profile…");
  await service.stop();
  const path = findProfile(dir);
  if (!path) throw new Error(`no .cpuprofile in ${dir}: did the service exit cleanly?`);
  summariseProfile(path, from, to);
}

/**
 * BENCH_HEAP_PROFILE=1: the same, under V8's sampling heap profiler (bench/execute/heap-hook.ts, started
 * and stopped by SIGUSR2 around the load window): what the service allocated per execute, and where.
 */
async function runHeapProfile(env: Record<string, string>): Promise<void> {
  const file = join(mkdtempSync(join(os.tmpdir(), "agentmarket-heap-prof-")), "heap.heapprofile");
  const { service, execute } = await serviceToProfile({ ...env, BENCH_HEAP_PROFILE_FILE: file }, [
    "--import",
    HEAP_HOOK,
  ]);
  process.kill(service.pid, "SIGUSR2");
  const m = await measureProfiled(env, service, execute);
  process.kill(service.pid, "SIGUSR2");
  for (let waited = 0; !existsSync(file) && waited < 10_000; waited += 100) await sleep(100);
  await service.stop();
  if (!existsSync(file)) throw new Error(`no heap profile at ${file}: did the service load the hook?`);
  // Every answer the load counted, 2xx or not, was an execute the service ran code for.
  summariseHeapProfile(file, m.ok + m.other2xx + m.non2xx);
}

/**
 * BENCH_TIMELINE=1: the execute to profile (the free one, or the paid one with BENCH_PROFILE_PAID=1)
 * alone at c=1 on a service that loads the timeline hook; its stamps over the load window, read as the
 * critical path (bench/execute/timeline.ts), beside the direct call it wraps. The paid execute's seller
 * is started first, so that the hook knows its port.
 */
async function runTimeline(env: Record<string, string>): Promise<void> {
  const file = join(mkdtempSync(join(os.tmpdir(), "agentmarket-timeline-")), "events.json");
  const peer = PROFILE_PAID ? await startPeer((child) => children.push(child)) : undefined;
  const hookEnv: Record<string, string> = { BENCH_TIMELINE_FILE: file };
  if (peer) hookEnv.BENCH_TIMELINE_SELLER_PORT = new URL(peer.sellerUrl).port;
  const { service, execute, direct } = await serviceToProfile(
    { ...env, ...hookEnv },
    ["--import", TIMELINE_HOOK],
    peer,
  );
  log(`measuring ${direct.scenario} at c=1 for ${SECONDS} s…`);
  const baseline = await measure({ ...direct, seconds: SECONDS }, service.pid);
  log(`measuring ${execute.scenario} at c=1 for ${SECONDS} s, stamped inside the service…`);
  const from = monotonicMicros();
  const m = await measure({ ...execute, seconds: SECONDS }, service.pid);
  const to = monotonicMicros();
  reportFailures(m);
  process.kill(service.pid, "SIGUSR2");
  for (let waited = 0; !existsSync(file) && waited < 5000; waited += 100) await sleep(100);
  await tidyAfterProfile(env);
  await service.stop();
  const events = (JSON.parse(readFileSync(file, "utf8")) as [number, string][]).filter(
    ([t]) => t >= from && t <= to,
  );
  log(
    `  ${fixed(m.okPerSecond, 0)} executes/s, p50 ${fixed(m.p50Ms)} ms (${direct.scenario} p50 ${fixed(baseline.p50Ms)} ms)`,
  );
  printCriticalPath(
    PROFILE_PAID
      ? paidCriticalPath(events, "/api/execute")
      : criticalPath(events, { execute: "/api/execute", provider: "/api/tools/echo" }),
    baseline.p50Ms,
  );
}

async function run(): Promise<void> {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  if (!Number.isInteger(PEER_ROUNDS) || PEER_ROUNDS < 0)
    throw new Error("BENCH_PEER_ROUNDS must be a whole number, 0 or more");
  // Its own database and queue prefix when asked, to run beside another checkout's bench:execute.
  const infra = await resolveInfra(process.env, {
    database: process.env.BENCH_DATABASE ?? "agentmarket_bench",
    queuePrefix: process.env.BENCH_QUEUE_PREFIX ?? "{ambench}",
  });
  const databaseUrl = infra.env.DATABASE_URL;
  printMachine(infra, [`${SECONDS} s per run, ${WARM_UP_REQUESTS} warm-up requests per scenario`]);
  if (databaseUrl) standIn = await AutovacuumStandIn.when(databaseUrl, log);
  await resetCircuits(infra.env);
  // Loopback sellers (the paid listing's, the fallback scenario's) must be callable.
  const env = { ...infra.env, OUTBOUND_ALLOWLIST: "127.0.0.1" };
  if (CPU_PROFILE) return runProfile(env);
  if (HEAP_PROFILE) return runHeapProfile(env);
  if (TIMELINE) return runTimeline(env);
  // The free rows run on the default all-in-one service (npm start's, no chain in it); the paid rows on a
  // second one with DEV_CHAIN=1, started after the free rows, whose in-process EVM mines a block a
  // second on its event loop: in the free runs' process it cost their p99 at c=1 ~2 ms
  // (docs/benchmarks.md "The dev chain's share").
  const service = await startBenchService(env);
  const apiKey = await register(service.baseUrl);
  const linesBefore = service.lineCount();
  let paidService: Service | undefined;
  let paidLinesBefore = 0;
  let paidOutput: ReturnType<typeof tallySince> | undefined;

  if (SKIP_THROUGHPUT) log("BENCH_SKIP_THROUGHPUT=1: the peer, echo and paid measurements skipped");
  else {
    const peer: Peer = await startPeer((child) => children.push(child));
    log(`peer: Portkey (pid ${peer.portkey.pid}), fake provider and seller (pid ${peer.upstream.pid})`);
    // The floor of a durable router commits to the bench's database, so it needs that database's address.
    let floor: Floor | undefined;
    if (databaseUrl) {
      floor = await startFloor(peer, databaseUrl, (child) => children.push(child));
      log(`floor of a durable router (pid ${floor.process.pid}), on the same fake provider`);
    } else
      loud("the floor of a durable router is skipped: it needs the database's address (BENCH_DATABASE_URL)");
    const floorSpecs = floor ? [floor.bare, floor.durable] : [];
    await preflightChat([peer.direct, peer.routed, ...floorSpecs]);
    const { direct, execute } = echoScenarios(service.baseUrl, apiKey);
    await preflightEcho([direct, execute]);
    if (databaseUrl) await vacuumAnalyzeDatabase(databaseUrl);
    const groups = {
      service: [service.pid],
      upstream: [peer.upstream.pid],
      portkey: [peer.portkey.pid],
      floor: floor ? [floor.process.pid] : [],
    };
    // The floor last in each pass: its c=32 run commits ~5,000 calls a second into the same server, and
    // whatever that leaves PostgreSQL to do afterwards (dirty pages to write out) falls after ours.
    const results = await measureAll([peer.direct, peer.routed, direct, execute, ...floorSpecs], groups);
    const interleaved = await measureInterleaved(peer, { direct, routed: execute }, groups, floor?.durable);

    let paid: Awaited<ReturnType<typeof setUpPaid>> | undefined;
    if (databaseUrl) {
      // The dev chain opens the paid gate: a local EVM in that service's process. Its own queue prefix
      // (the hash tag kept): the first service, still up, must not take its jobs. A deposit's
      // confirmation job taken there met no chain ("settlement_rpc_not_configured") and was never
      // credited.
      const prefix = infra.env.QUEUE_PREFIX;
      const paidEnv: Record<string, string> = { ...env, DEV_CHAIN: "1", DEV_CHAIN_PORT: "0" };
      if (prefix) paidEnv.QUEUE_PREFIX = `${prefix}-paid`;
      await resetCircuits(paidEnv);
      paidService = await startBenchService(paidEnv);
      paidLinesBefore = paidService.lineCount();
      // A fresh process: the free rows' service had run thousands of executes through the same code before.
      const warmEcho = echoScenarios(paidService.baseUrl, await register(paidService.baseUrl)).execute;
      await preflightEcho([warmEcho]);
      await warmUp({ ...warmEcho, connections: 4 }, PAID_SERVICE_WARM_UP);
      paid = await setUpPaid(paidService.baseUrl, databaseUrl, peer.sellerUrl);
      await vacuumAnalyzeDatabase(databaseUrl);
      const paidGroups = { ...groups, service: [paidService.pid] };
      results.push(...(await measureAll([paid.direct, paid.execute], paidGroups)));
      results.push(await measurePaidSpread(paid.spread, paidGroups));
    } else
      loud(
        "the paid execute is skipped: it inserts its listing into the service's database, whose address " +
          "the bench does not know with the embedded PostgreSQL (set BENCH_DATABASE_URL)",
      );
    printResults(results);
    const roundResults = interleaved.flatMap((r) => [
      r.peerDirect,
      r.peerRouted,
      ...(r.floor ? [r.floor] : []),
      r.oursDirect,
      r.oursRouted,
      r.peerRouted32,
      r.oursRouted32,
    ]);
    if ([...results, ...roundResults].map((m) => reportFailures(m)).some(Boolean)) {
      loud("THIS BENCHMARK SAW ERRORS: the numbers above do not describe healthy services.");
      log();
    }
    const pairs: Pair[] = [{ name: "free", direct: direct.scenario, routed: execute.scenario }];
    if (paid)
      pairs.push({
        name: "paid",
        direct: paid.direct.scenario,
        routed: paid.execute.scenario,
        spread: paid.spread[0]?.scenario,
      });
    const floorPair = (name: string, spec: EchoSpec) => ({
      name,
      direct: peer.direct.scenario,
      routed: spec.scenario,
    });
    printRatios(
      results,
      { name: "Portkey", direct: peer.direct.scenario, routed: peer.routed.scenario },
      pairs,
      floor && { bare: floorPair("bare proxy", floor.bare), durable: floorPair("floor", floor.durable) },
    );
    printInterleaved(interleaved);

    if (COUNT_ROUND_TRIPS && databaseUrl) {
      if (infra.env.REDIS_URL) await drainExecutions(infra.env);
      const echoed = (json: any) => json?.output?.echo?.message === ECHO_MESSAGE;
      const counted = (s: Service) => ({
        baseUrl: s.baseUrl,
        servicePid: s.pid,
        databaseUrl,
        redisUrl: infra.env.REDIS_URL,
      });
      await countRoundTrips(counted(service), [
        { label: "free execute (echo)", spec: execute, requests: COUNT_FREE, check: echoed },
      ]);
      if (paid && paidService)
        await countRoundTrips(counted(paidService), [
          {
            label: `paid execute (${PAID_PRICE_USDC} USDC)`,
            spec: paid.execute,
            requests: COUNT_PAID,
            check: (json) => echoed(json) && json?.cost?.charged === true,
          },
        ]);
    } else if (COUNT_ROUND_TRIPS)
      loud("round trips: skipped, the embedded PostgreSQL's address is not known (set BENCH_DATABASE_URL)");
    if (databaseUrl) await retirePaidListings(databaseUrl);
    // The paid seller lives in the upstream process: stopped once nothing calls it any more.
    // What the paid rows' service printed, taken before it stops (its exit line is not a warning).
    if (paidService) paidOutput = tallySince(paidService, paidLinesBefore);
    await Promise.all([
      peer.portkey.stop(),
      peer.upstream.stop(),
      floor?.process.stop(),
      paidService?.stop(),
    ]);
  }

  if (databaseUrl) await runFallbackBench({ baseUrl: service.baseUrl, apiKey, databaseUrl, log, loud });
  else
    loud(
      "one fallback: skipped, it inserts listings into the service's database and the embedded one's " +
        "address is not known to the bench (set BENCH_DATABASE_URL or run PostgreSQL on 127.0.0.1:5432)",
    );
  reportOutput("the service", tallySince(service, linesBefore));
  if (paidOutput) reportOutput("the paid execute's service", paidOutput);
}

await runBench(run, () => children);
