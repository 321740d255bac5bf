import { freePort } from "../shared/infra/free-port.js";
import {
  drainExecutions,
  echoScenarios,
  fixed,
  type GroupCpuUse,
  LineTally,
  type LoadResult,
  log,
  loud,
  measureAcross,
  preflightEcho,
  printMachine,
  register,
  reportFailures,
  reportOutput,
  resetCircuits,
  resolveInfra,
  runBench,
  runRelease,
  type Service,
  startGroupCpuMeter,
  startProcfileProcess,
  table,
  vacuumAnalyzeDatabase,
  waitForHealth,
  waitForWorkers,
  warmUp,
} from "./lib.js";

/**
 * `npm run bench:scale`: scale out on the engine we already run. The Procfile's `web` and `executions`
 * processes run as separate OS processes on the machine's PostgreSQL and Redis (the `release` step
 * migrates first), and each step of the ladder — 1 → 2 → 4 executions workers, then 1 → 2 API
 * processes — measures POST /api/execute (echo) at c=32. With two API processes the connections are
 * split between their ports (no load balancer, whose own cost would be measured). Each step starts
 * from fresh processes. A verdict per step says whether the machine or the design is the limit.
 * The other Procfile processes (probes, monitoring, settlement, payouts) take no part in an echo
 * execute and are not started. Never fails on the figures; exits 1 only when the run itself broke.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 32;
const WARM_UP_REQUESTS = 300;
const HEALTH_TIMEOUT_MS = 60_000;
const WORKERS_TIMEOUT_MS = 30_000;
/** At or above this share of all cores busy, the machine is the limit, not the design. */
const MACHINE_BOUND_PCT = 90;
/** A process at or above this many cores has one saturated event loop. */
const SATURATED_CORES = 0.9;
/** Its own database and queue prefix: it may run while bench:execute does on the same servers. */
const PLACE = { database: "agentmarket_bench_scale", queuePrefix: "{ambench_scale}" } as const;

interface Step {
  web: number;
  executions: number;
}

const LADDER: readonly Step[] = [
  { web: 1, executions: 1 },
  { web: 1, executions: 2 },
  { web: 1, executions: 4 },
  { web: 2, executions: 4 },
];

type Group = "web" | "executions";

interface StepResult {
  step: Step;
  load: LoadResult;
  cpu: GroupCpuUse<Group>;
}

/** Every child running now; guardChildren kills these however the bench ends. */
const running = new Set<Service>();
const tallies: Record<Group, LineTally> = { web: new LineTally(), executions: new LineTally() };
/** Lines printed while a step's processes are being stopped are shutdown noise, not findings. */
let stopping = false;

function start(group: Group, env: Record<string, string>, port?: number): Service {
  const child = startProcfileProcess(group, env, {
    port,
    onLine: (line) => {
      if (!stopping) tallies[group].add(line);
    },
  });
  running.add(child);
  return child;
}

/** Connections split as evenly as possible over the API processes. */
function split(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

async function runStep(step: Step, index: number, env: Record<string, string>): Promise<StepResult> {
  log(`step ${index + 1}: ${step.web} web, ${step.executions} executions — starting processes…`);
  const webs: Service[] = [];
  for (let i = 0; i < step.web; i += 1) webs.push(start("web", env, await freePort()));
  // A worker calls the first-party echo on an API process; workers are spread over them. The API is
  // healthy only once a worker consumes the executions queue, so both start before either is awaited.
  const workers = Array.from({ length: step.executions }, (_, i) =>
    start("executions", { ...env, FIRST_PARTY_BASE_URL: webs[i % webs.length]!.baseUrl }),
  );
  try {
    await waitForWorkers(env, step.executions, workers, WORKERS_TIMEOUT_MS);
    await Promise.all(webs.map((w) => waitForHealth(w, HEALTH_TIMEOUT_MS)));
    // Jobs an aborted earlier run left active under this prefix are stalled: BullMQ hands them to the new
    // workers at once, before any web process listens, and their failed echo calls can open echo's
    // circuit. Forgotten here, once the processes are up, so the step measures only itself.
    await resetCircuits(env);
    const apiKey = await register(webs[0]!.baseUrl);
    const specs = webs.map((w) => echoScenarios(w.baseUrl, apiKey).execute);
    await preflightEcho(specs);
    const shares = split(CONNECTIONS, webs.length);
    await Promise.all(
      specs.map((spec, i) => warmUp({ ...spec, connections: shares[i]! }, WARM_UP_REQUESTS / webs.length)),
    );
    await vacuumAnalyzeDatabase(env.DATABASE_URL!);
    log(`  measuring c=${CONNECTIONS} (${shares.join(" + ")} over ${webs.length} port(s)) for ${SECONDS} s…`);
    const meter = startGroupCpuMeter<Group>({
      web: webs.map((w) => w.pid),
      executions: workers.map((w) => w.pid),
    });
    const load = await measureAcross(
      specs.map((spec, i) => ({
        ...spec,
        scenario: `${step.web} web + ${step.executions} executions`,
        connections: shares[i]!,
        seconds: SECONDS,
      })),
    );
    const cpu = meter.stop();
    const dead = [...webs, ...workers].find((c) => c.hasExited());
    if (dead) throw new Error(`a process exited during the step:\n${dead.lines().join("\n")}`);
    return { step, load, cpu };
  } finally {
    await drainExecutions(env).catch((err) => loud(`draining the queue: ${(err as Error).message}`));
    stopping = true;
    // Workers first: a worker's last echo call needs its API process.
    await Promise.all(workers.map((c) => c.stop()));
    await Promise.all(webs.map((c) => c.stop()));
    for (const c of [...workers, ...webs]) running.delete(c);
    stopping = false;
  }
}

function printTable(results: StepResult[]): void {
  const first = results[0]!.load.okPerSecond;
  log(
    "Results (latency and throughput count 200 answers only; CPU in cores, machine busy % across all cores)",
  );
  log(
    table(
      [
        "step",
        "web",
        "executions",
        "executes/s",
        "× step 1",
        "p50 ms",
        "p99 ms",
        "non-2xx/errors",
        "web cpu",
        "executions cpu",
        "postgres",
        "redis",
        "bench client",
        "other",
        "machine busy %",
        "cpu ms/execute",
      ],
      results.map(({ step, load, cpu }, i) => [
        String(i + 1),
        String(step.web),
        String(step.executions),
        fixed(load.okPerSecond, 0),
        fixed(load.okPerSecond / first),
        fixed(load.p50Ms),
        fixed(load.p99Ms),
        `${load.non2xx + load.other2xx}/${load.errors}`,
        fixed(cpu.groups.web.cores),
        fixed(cpu.groups.executions.cores),
        fixed(cpu.postgres),
        fixed(cpu.redis),
        fixed(cpu.bench),
        fixed(cpu.other),
        fixed(cpu.machineBusyPct, 0),
        fixed(cpuMsPerExecute(results[i]!)),
      ]),
    ),
  );
  log();
}

/** CPU the service spent per execute, all its parts together (web, workers, PostgreSQL, Redis), in ms. */
function cpuMsPerExecute({ load, cpu }: StepResult): number {
  const cores = cpu.groups.web.cores + cpu.groups.executions.cores + cpu.postgres + cpu.redis;
  return (1000 * cores) / load.okPerSecond;
}

/** What limits a step, from its figures: the machine's cores, one saturated process, or waiting. */
function verdict(r: StepResult, previous: StepResult | undefined): string {
  const { step, load, cpu } = r;
  const gain = previous ? `${fixed(load.okPerSecond / previous.load.okPerSecond)}× the step before; ` : "";
  const perWeb = cpu.groups.web.cores / step.web;
  const perWorker = cpu.groups.executions.cores / step.executions;
  if (cpu.machineBusyPct >= MACHINE_BOUND_PCT) {
    const parts = [
      ["web", cpu.groups.web.cores],
      ["executions", cpu.groups.executions.cores],
      ["postgres", cpu.postgres],
      ["redis", cpu.redis],
      ["bench client", cpu.bench],
      ["other", cpu.other],
    ] as const;
    const biggest = [...parts].sort((a, b) => b[1] - a[1]).slice(0, 2);
    const dearer =
      previous && cpuMsPerExecute(r) > 1.05 * cpuMsPerExecute(previous)
        ? `; each execute cost more CPU than before (${fixed(cpuMsPerExecute(r))} vs ` +
          `${fixed(cpuMsPerExecute(previous))} ms: more processes, connections and polling on the same cores)`
        : "";
    return (
      `${gain}MACHINE-bound, not the design: ${fixed(cpu.machineBusyPct, 0)} % of the cores busy ` +
      `(most: ${biggest.map(([name, c]) => `${name} ${fixed(c)}`).join(", ")}), so added processes only ` +
      `share the same cores${dearer}`
    );
  }
  if (perWeb >= SATURATED_CORES)
    return `${gain}one API process is the limit: ${fixed(perWeb)} cores each (its event loop is full)`;
  if (perWorker >= SATURATED_CORES)
    return `${gain}one executions worker is the limit: ${fixed(perWorker)} cores each (its event loop is full)`;
  return (
    `${gain}not the machine (${fixed(cpu.machineBusyPct, 0)} % busy) and no process saturated: the limit is ` +
    "waiting (commits, Redis round trips, EXECUTIONS_CONCURRENCY, the client's 32 connections) — the design"
  );
}

function printVerdicts(results: StepResult[]): void {
  log(`Verdict per step (machine-bound at ≥ ${MACHINE_BOUND_PCT} % busy)`);
  results.forEach((r, i) => {
    const label = `${r.step.web} web, ${r.step.executions} executions`;
    log(`  step ${i + 1} (${label}): ${fixed(r.load.okPerSecond, 0)}/s — ${verdict(r, results[i - 1])}`);
  });
  for (const [i, r] of results.entries()) {
    if (r.cpu.other < 0.2) continue;
    const who = r.cpu.busiestOthers.map((o) => `${o.comm} ${fixed(o.cores)}`).join(", ") || "the kernel";
    loud(`step ${i + 1}: ${fixed(r.cpu.other)} cores used outside the bench (${who})`);
  }
  log();
}

async function run(): Promise<void> {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  const infra = await resolveInfra(process.env, PLACE);
  if (!infra.env.DATABASE_URL || !infra.env.REDIS_URL)
    throw new Error(
      "separate processes need a shared PostgreSQL and Redis: run them on 127.0.0.1:5432 / 6379 or set " +
        "BENCH_DATABASE_URL and BENCH_REDIS_URL (the embedded ones live inside one all-in-one process)",
    );
  printMachine(infra, [
    `${SECONDS} s per step at c=${CONNECTIONS}, ${WARM_UP_REQUESTS} warm-up requests per step`,
    "postgres and redis are the machine's servers: their columns include anyone else's use of them",
  ]);
  log("release: migrating…");
  await runRelease(infra.env);
  await resetCircuits(infra.env);
  const results: StepResult[] = [];
  for (const [i, step] of LADDER.entries()) results.push(await runStep(step, i, infra.env));
  log();
  printTable(results);
  const failed = results.map((r) => reportFailures(r.load)).some(Boolean);
  if (failed) {
    loud("THIS BENCHMARK SAW ERRORS: the numbers above do not describe a healthy service.");
    log();
  }
  printVerdicts(results);
  reportOutput("the web processes", tallies.web);
  reportOutput("the executions workers", tallies.executions);
}

await runBench(
  run,
  () => running,
  () => {
    stopping = true;
  },
);
