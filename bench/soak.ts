import { freePort } from "../shared/infra/free-port.js";
import {
  AutovacuumStandIn,
  drainExecutions,
  echoScenarios,
  fixed,
  LineTally,
  log,
  loud,
  mean,
  measureAcross,
  preflightEcho,
  printMachine,
  readHeapUsedMb,
  readRssMb,
  register,
  reportFailures,
  reportOutput,
  resetCircuits,
  resolveInfra,
  runBench,
  type Service,
  slope,
  sparkline,
  startCpuMeter,
  startService,
  table,
  vacuumAnalyzeDatabase,
  waitForHealth,
  warmUp,
} from "./lib.js";

/**
 * `npm run bench:soak`: the all-in-one service (API and every worker in one process) under
 * POST /api/execute (echo) at c=32 for SOAK_SECONDS (default 600), its resident set sampled every
 * SOAK_SAMPLE_SECONDS (default 10) from /proc and its V8 heap from its own /metrics. Targets from the
 * issue: RSS ≤ 300 MB under that load and flat across the soak, no listener or timer leak warnings.
 * Prints PASS/MISS lines; exits 1 only when the run itself broke (the service died, the load could not
 * start), never for a missed target.
 */

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 10);
const CONNECTIONS = 32;
const WARM_UP_REQUESTS = 1000;
const HEALTH_TIMEOUT_MS = 60_000;
const TARGET_RSS_MB = 300;
/** "Flat", as this bench judges it: the second half's trend, and the last minute against the first. */
const FLAT_SLOPE_MB_PER_MIN = 1;
const FLAT_GROWTH_MB = 20;
/** How often the bench does autovacuum's work on a server that runs without it (autovacuum's own nap). */
const VACUUM_EVERY_MS = 60_000;
/** Its own database and queue prefix: it may run while another bench does on the same servers. */
const PLACE = { database: "agentmarket_bench_soak", queuePrefix: "{ambench_soak}" } as const;
/** Node's warnings for the leaks the issue names; any other line is counted too (LOG_LEVEL=warn). */
const LEAK_WARNINGS = [
  "MaxListenersExceededWarning",
  "TimeoutOverflowWarning",
  "possible EventEmitter memory leak",
] as const;

interface Sample {
  /** Seconds since the soak started (after warm-up). */
  t: number;
  rssMb: number;
  heapMb: number;
  /** 200 answers per second since the previous sample. */
  executesPerS: number;
}

let service: Service | undefined;
const tally = new LineTally();
/** Lines are tallied from the end of warm-up on: start-up is not what a soak judges. */
let counting = false;

async function sample(svc: Service, t: number, executesPerS: number): Promise<Sample> {
  return {
    t,
    rssMb: readRssMb(svc.pid),
    heapMb: await readHeapUsedMb(`${svc.baseUrl}/metrics`),
    executesPerS,
  };
}

/** Samples every SAMPLE_SECONDS while `load` runs; prints each sample as it comes. */
async function soak(svc: Service, apiKey: string): Promise<Sample[]> {
  const spec = { ...echoScenarios(svc.baseUrl, apiKey).execute, connections: CONNECTIONS, seconds: SECONDS };
  const samples: Sample[] = [await sample(svc, 0, Number.NaN)];
  log(`  t=0 s  rss ${fixed(samples[0]!.rssMb, 1)} MB  heap ${fixed(samples[0]!.heapMb, 1)} MB`);
  let okSince = 0;
  const started = performance.now();
  let lastAt = started;
  let sampling = Promise.resolve();
  const timer = setInterval(() => {
    const now = performance.now();
    const rate = okSince / ((now - lastAt) / 1000);
    okSince = 0;
    lastAt = now;
    const t = Math.round((now - started) / 1000);
    sampling = sampling.then(async () => {
      const s = await sample(svc, t, rate);
      samples.push(s);
      log(
        `  t=${t} s  rss ${fixed(s.rssMb, 1)} MB  heap ${fixed(s.heapMb, 1)} MB  ${fixed(rate, 0)} executes/s`,
      );
    });
  }, SAMPLE_SECONDS * 1000);
  const meter = startCpuMeter(svc.pid);
  try {
    const load = await measureAcross([spec], (status) => {
      if (status === 200) okSince += 1;
    });
    const cpu = meter.stop();
    log();
    log(
      `load: ${fixed(load.okPerSecond, 0)} executes/s over ${fixed(load.durationS, 0)} s, p50 ${fixed(load.p50Ms)} ms, ` +
        `p99 ${fixed(load.p99Ms)} ms; CPU in cores: service ${fixed(cpu.service)}, postgres ${fixed(cpu.postgres)}, ` +
        `redis ${fixed(cpu.redis)}, bench client ${fixed(cpu.bench)}, other ${fixed(cpu.other)}, ` +
        `machine ${fixed(cpu.machineBusyPct, 0)} % busy`,
    );
    if (reportFailures(load)) loud("THIS SOAK SAW ERRORS: the service was not healthy throughout.");
  } finally {
    clearInterval(timer);
    await sampling;
  }
  return samples;
}

function printCurve(samples: Sample[]): void {
  log();
  log(`RSS curve (a sample every ${SAMPLE_SECONDS} s; executes/s over the interval before each sample)`);
  log(
    table(
      ["t s", "rss MB", "heap used MB", "executes/s"],
      samples.map((s) => [String(s.t), fixed(s.rssMb, 1), fixed(s.heapMb, 1), fixed(s.executesPerS, 0)]),
    ),
  );
  const rss = samples.map((s) => s.rssMb);
  const finite = rss.filter(Number.isFinite);
  log();
  log(`rss  ${sparkline(rss)}  (${fixed(Math.min(...finite), 0)}–${fixed(Math.max(...finite), 0)} MB)`);
  const heap = samples.map((s) => s.heapMb);
  if (heap.some(Number.isFinite)) {
    const h = heap.filter(Number.isFinite);
    log(`heap ${sparkline(heap)}  (${fixed(Math.min(...h), 0)}–${fixed(Math.max(...h), 0)} MB)`);
  }
}

function judge(samples: Sample[]): void {
  const finite = samples.filter((s) => Number.isFinite(s.rssMb));
  if (finite.length < 2) {
    loud("fewer than two RSS samples (is /proc available?): nothing to judge");
    return;
  }
  const end = finite.at(-1)!.t;
  const maxRss = Math.max(...finite.map((s) => s.rssMb));
  const secondHalf = finite.filter((s) => s.t >= end / 2);
  const slopePerMin = slope(
    secondHalf.map((s) => s.t / 60),
    secondHalf.map((s) => s.rssMb),
  );
  const firstMinute = mean(finite.filter((s) => s.t <= 60).map((s) => s.rssMb));
  const lastMinute = mean(finite.filter((s) => s.t >= end - 60).map((s) => s.rssMb));
  const growth = lastMinute - firstMinute;
  const leaks = LEAK_WARNINGS.map((w) => [w, tally.matching(w)] as const);
  const leakCount = leaks.reduce((sum, [, n]) => sum + n, 0);
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  log();
  log(`Measured over ${end} s of soak at c=${CONNECTIONS}, after ${WARM_UP_REQUESTS} warm-up requests`);
  log(`  max RSS: ${fixed(maxRss, 1)} MB`);
  log(`  RSS slope over the second half (t ≥ ${fixed(end / 2, 0)} s): ${fixed(slopePerMin, 2)} MB/min`);
  log(
    `  last-minute mean ${fixed(lastMinute, 1)} MB − first-minute mean ${fixed(firstMinute, 1)} MB = ` +
      `${fixed(growth, 1)} MB${end < 120 ? " (the run is shorter than two minutes: the minutes overlap)" : ""}`,
  );
  log(`  warning lines the service printed after warm-up: ${tally.total}`);
  for (const [w, n] of leaks) log(`    ${n}× ${w}`);
  log();
  log(
    `Targets from the issue: RSS ≤ ${TARGET_RSS_MB} MB at c=${CONNECTIONS}, flat across the soak ` +
      `(here: slope ≤ ${FLAT_SLOPE_MB_PER_MIN} MB/min and growth ≤ ${FLAT_GROWTH_MB} MB), no leak warnings`,
  );
  log(`  ${verdict(maxRss <= TARGET_RSS_MB)}  max RSS ${fixed(maxRss, 1)} MB ≤ ${TARGET_RSS_MB} MB`);
  log(
    `  ${verdict(slopePerMin <= FLAT_SLOPE_MB_PER_MIN)}  second-half slope ${fixed(slopePerMin, 2)} MB/min ≤ ` +
      `${FLAT_SLOPE_MB_PER_MIN}`,
  );
  log(
    `  ${verdict(growth <= FLAT_GROWTH_MB)}  last minute − first minute ${fixed(growth, 1)} MB ≤ ${FLAT_GROWTH_MB}`,
  );
  log(`  ${verdict(leakCount === 0)}  ${leakCount} listener/timer leak warnings`);
  if (SECONDS < 600) log(`  (SOAK_SECONDS=${SECONDS}: shorter than the issue's 10-minute soak)`);
}

async function run(): Promise<void> {
  for (const [name, value] of [
    ["SOAK_SECONDS", SECONDS],
    ["SOAK_SAMPLE_SECONDS", SAMPLE_SECONDS],
  ] as const)
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  const infra = await resolveInfra(process.env, PLACE);
  await resetCircuits(infra.env);
  printMachine(infra, [
    `soak of ${SECONDS} s at c=${CONNECTIONS}, a sample every ${SAMPLE_SECONDS} s, ${WARM_UP_REQUESTS} warm-up requests`,
  ]);
  service = startService(await freePort(), infra.env, (line) => {
    if (counting) tally.add(line);
  });
  log(`starting the all-in-one service (pid ${service.pid}) on ${service.baseUrl}…`);
  await waitForHealth(service, HEALTH_TIMEOUT_MS);
  const apiKey = await register(service.baseUrl);
  const { execute } = echoScenarios(service.baseUrl, apiKey);
  await preflightEcho([execute]);
  log(`warming up (${WARM_UP_REQUESTS} requests at c=${CONNECTIONS})…`);
  await warmUp({ ...execute, connections: CONNECTIONS }, WARM_UP_REQUESTS);
  if (infra.env.DATABASE_URL) await vacuumAnalyzeDatabase(infra.env.DATABASE_URL);
  counting = true;
  const standIn = infra.env.DATABASE_URL
    ? await AutovacuumStandIn.when(infra.env.DATABASE_URL, log)
    : undefined;
  const stopVacuum = standIn ? standIn.every(VACUUM_EVERY_MS) : async () => {};
  log(`soaking for ${SECONDS} s…`);
  const samples = await soak(service, apiKey).finally(stopVacuum);
  if (service.hasExited()) throw new Error("the service exited during the soak");
  counting = false;
  if (infra.env.REDIS_URL) await drainExecutions(infra.env);
  printCurve(samples);
  judge(samples);
  reportOutput("the service", tally);
}

await runBench(run, () => (service ? [service] : []));
