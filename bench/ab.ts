import { isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../shared/infra/free-port.js";
import { SERVICE_NODE_FLAGS } from "../shared/infra/node-flags.js";
import { setUpPaid } from "./execute/paid.js";
import { startUpstream } from "./execute/peer.js";
import { readPg, STATS_SETTLE_MS } from "./execute/round-trips.js";
import {
  type EchoSpec,
  echoScenarios,
  fixed,
  log,
  mean,
  measure,
  median,
  type PostgresServer,
  register,
  reportFailures,
  resolvePostgresServer,
  runBench,
  type Service,
  sleep,
  startChild,
  table,
  vacuumAnalyzeDatabase,
  waitForHealth,
  warmUp,
  withPgClient,
} from "./lib.js";

/**
 * `npm run bench:ab`: this checkout against another build of the project, paired, on the same data.
 * Within one `bench:execute` run this machine's speed drifts by more than most single levers gain
 * (docs/benchmarks.md "The twelfth round"), so a lever is measured here: two all-in-one services, the
 * baseline's (BENCH_AB_BASELINE, a checkout with `npm ci && npm run build` done) and this one's, each on
 * its own copy of one template database (BENCH_AB_TEMPLATE, default agentmarket_bench: the history a
 * deployment has), on the machine's PostgreSQL and Redis (or BENCH_DATABASE_URL's server and BENCH_REDIS_URL). Each round, each side in turn (the side going
 * first alternating): the direct echo and the free execute at c=1, then the execute at c=32; both copies
 * vacuumed and analysed before each round. Prints each round's overheads and rates, the paired
 * differences, their medians and how often this side won, the WAL and the CPU (the service's, and
 * PostgreSQL's) each c=32 execute took, and each copy's share of HOT updates of `invocations`. Never
 * fails on the figures.
 *
 * BENCH_AB_PAID=1 (since the twentieth round) measures the paid execute instead, as bench:execute's
 * paid rows do: both services on their dev chain (DEV_CHAIN=1), a funded buyer and a paid listing each,
 * on one loopback seller (bench/execute/upstream.ts), its direct call the c=1 baseline.
 *
 * BENCH_AB_ENV and BENCH_AB_THIS_ENV (since the twenty-seventh round), e.g. `LOG_LEVEL=info`: variables,
 * separated by spaces, set for both services, and for this side's only (a setting measured paired, with
 * BENCH_AB_BASELINE a build of the same code). LOG_LEVEL among them: the services otherwise log at warn.
 *
 * BENCH_SECONDS (default 8) per run, BENCH_AB_ROUNDS (default 6). The template must not be migrated past
 * what the baseline knows (its service refuses a database with migrations it lacks): run the baseline's
 * `bench:execute` first, or give it a template of its own. The copies are dropped at the end.
 */

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 6);
const TEMPLATE = process.env.BENCH_AB_TEMPLATE ?? "agentmarket_bench";
const REDIS = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
const PAID = process.env.BENCH_AB_PAID === "1";
const BOTH_ENV = parseEnvList("BENCH_AB_ENV");
const THIS_ENV = parseEnvList("BENCH_AB_THIS_ENV");
const WARM_UP = { echo: 2000, execute: 3000 };
const HEALTH_TIMEOUT_MS = 90_000;

type Side = "baseline" | "this";

interface Running {
  service: Service;
  database: string;
  /** The c=1 pair of each round: the direct call, and the execute that wraps it. */
  direct: EchoSpec;
  execute: EchoSpec;
}

interface Round {
  first: Side;
  overhead: Record<Side, number>;
  /** The execute's p99 at c=1. */
  p99: Record<Side, number>;
  rate32: Record<Side, number>;
  /** WAL bytes per execute of the c=32 run (server-wide: the other side's idle background counts too). */
  wal32: Record<Side, number>;
  /**
   * CPU milliseconds per execute of the c=32 run: the side's service process (all its threads), and
   * PostgreSQL (server-wide). At c=32 the service's one JavaScript thread is the limit, and a lever that
   * takes work off it shows here in a single round, where the rate moves with the machine's phase.
   */
  cpu32: Record<Side, { service: number; postgres: number; stealPct: number }>;
}

/**
 * How the outcome's updates of `invocations` were written in a side's copy since it was made: the share
 * that was HOT (no index entries; docs/benchmarks.md "The fourteenth round"). Read after the statistics
 * settle (a backend reports its counts at most every few seconds when idle).
 */
async function invocationUpdates(url: string): Promise<{ updated: number; hot: number }> {
  return withPgClient(url, async (c) => {
    const { rows } = await c.query(
      "select n_tup_upd::float8 as updated, n_tup_hot_upd::float8 as hot from pg_stat_user_tables where relname = 'invocations'",
    );
    return { updated: Number(rows[0]?.updated ?? 0), hot: Number(rows[0]?.hot ?? 0) };
  });
}

/** The variable `name`'s "A=1 B=two" → { A: "1", B: "two" }; a word without "=" is refused (a typo shows). */
function parseEnvList(name: string): Record<string, string> {
  const pairs = (process.env[name] ?? "").split(/\s+/).filter((word) => word.length > 0);
  return Object.fromEntries(
    pairs.map((word) => {
      const at = word.indexOf("=");
      if (at <= 0) throw new Error(`${name}: "${word}" is not NAME=value`);
      return [word.slice(0, at), word.slice(at + 1)];
    }),
  );
}

const children: Service[] = [];

async function copyTemplate(server: PostgresServer, database: string): Promise<string> {
  await withPgClient(server.adminUrl, async (c) => {
    await c.query(`drop database if exists "${database}" with (force)`);
    await c.query(`create database "${database}" template "${TEMPLATE}"`);
  });
  return server.url(database);
}

/** A side's service on its copy of the template; with a seller, on its dev chain with a paid listing. */
async function start(
  server: PostgresServer,
  side: Side,
  root: string,
  sellerUrl: string | undefined,
): Promise<Running> {
  const database = `agentmarket_ab_${side}`;
  const url = await copyTemplate(server, database);
  const port = await freePort();
  const chain: Record<string, string> = sellerUrl
    ? { DEV_CHAIN: "1", DEV_CHAIN_PORT: "0", OUTBOUND_ALLOWLIST: "127.0.0.1" }
    : {};
  const own = { ...BOTH_ENV, ...(side === "this" ? THIS_ENV : {}) };
  const service = startChild({
    script: join(root, "dist/api/all-in-one.js"),
    port,
    nodeArgs: [...SERVICE_NODE_FLAGS],
    env: { DATABASE_URL: url, REDIS_URL: REDIS, QUEUE_PREFIX: `{amab-${side}}`, ...chain, ...own },
  });
  children.push(service);
  await waitForHealth(service, HEALTH_TIMEOUT_MS);
  const extra =
    Object.keys(own).length > 0
      ? ` with ${Object.entries(own)
          .map(([k, v]) => `${k}=${v}`)
          .join(" ")}`
      : "";
  log(`${side}: ${root} (pid ${service.pid}) on ${database}${extra}`);
  const free = echoScenarios(service.baseUrl, await register(service.baseUrl));
  if (!sellerUrl) return { service, database, ...free };
  // The service is warmed on the free execute first, as bench:execute's paid service is.
  await warmUp({ ...free.execute, connections: 4 }, WARM_UP.echo);
  const paid = await setUpPaid(service.baseUrl, url, sellerUrl);
  return { service, database, direct: paid.direct, execute: paid.execute };
}

async function run(): Promise<void> {
  if (!Number.isFinite(SECONDS) || SECONDS <= 0) throw new Error("BENCH_SECONDS must be a positive number");
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error("BENCH_AB_ROUNDS must be a whole number ≥ 1");
  const baseline = process.env.BENCH_AB_BASELINE;
  if (!baseline) throw new Error("set BENCH_AB_BASELINE to another checkout of the project, built");
  const roots: Record<Side, string> = {
    baseline: isAbsolute(baseline) ? baseline : resolve(baseline),
    this: fileURLToPath(new URL("../../", import.meta.url)),
  };
  // The template is never the admin connection: a copy needs the template free of connections.
  const server = await resolvePostgresServer(TEMPLATE);
  if (!server) throw new Error("no PostgreSQL: set BENCH_DATABASE_URL or run one on 127.0.0.1:5432");
  const sellerUrl = PAID ? (await startUpstream((child) => children.push(child))).sellerUrl : undefined;
  const sides: Record<Side, Running> = {
    baseline: await start(server, "baseline", roots.baseline, sellerUrl),
    this: await start(server, "this", roots.this, sellerUrl),
  };
  for (const side of ["baseline", "this"] as const) {
    await warmUp({ ...sides[side].direct, connections: 4 }, WARM_UP.echo);
    await warmUp({ ...sides[side].execute, connections: 4 }, WARM_UP.execute);
  }
  const go = async (side: Side, spec: "direct" | "execute", connections: number) => {
    const m = await measure({ ...sides[side][spec], connections, seconds: SECONDS }, sides[side].service.pid);
    reportFailures(m, `${side} ${m.scenario} c=${connections}`);
    return m;
  };
  const rounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    for (const side of ["baseline", "this"] as const)
      await vacuumAnalyzeDatabase(server.url(sides[side].database));
    const order: Side[] = i % 2 === 0 ? ["baseline", "this"] : ["this", "baseline"];
    log(`round ${i + 1}: ${order[0]} first…`);
    const overhead = {} as Record<Side, number>;
    const p99 = {} as Record<Side, number>;
    for (const side of order) {
      const direct = await go(side, "direct", 1);
      const execute = await go(side, "execute", 1);
      overhead[side] = execute.p50Ms - direct.p50Ms;
      p99[side] = execute.p99Ms;
    }
    const rate32 = {} as Record<Side, number>;
    const wal32 = {} as Record<Side, number>;
    const cpu32 = {} as Round["cpu32"];
    for (const side of order) {
      const wal = async () => (await readPg(server.adminUrl, sides[side].database)).wal;
      const before = await wal();
      const m = await go(side, "execute", 32);
      rate32[side] = m.okPerSecond;
      wal32[side] = ((await wal()) - before) / Math.max(1, m.ok);
      const msPerExecute = (cores: number) => (1000 * cores) / Math.max(1, m.okPerSecond);
      cpu32[side] = {
        service: msPerExecute(m.cpu.service),
        postgres: msPerExecute(m.cpu.postgres),
        stealPct: m.cpu.machineStealPct,
      };
    }
    rounds.push({ first: order[0]!, overhead, p99, rate32, wal32, cpu32 });
  }
  report(rounds);
  await sleep(STATS_SETTLE_MS);
  for (const side of ["baseline", "this"] as const) {
    const u = await invocationUpdates(server.url(sides[side].database));
    log(
      `${side}: ${fixed(u.updated, 0)} updates of invocations, ${fixed((100 * u.hot) / Math.max(1, u.updated), 0)} % HOT`,
    );
  }
  await Promise.all(Object.values(sides).map((s) => s.service.stop()));
  await withPgClient(server.adminUrl, async (c) => {
    for (const s of Object.values(sides))
      await c.query(`drop database if exists "${s.database}" with (force)`);
  });
}

function report(rounds: readonly Round[]): void {
  log();
  log(
    PAID
      ? "Paid execute, this checkout against the baseline, paired rounds (overhead = p50 execute − p50 direct seller call)"
      : "Free execute, this checkout against the baseline, paired rounds (overhead = p50 execute − p50 direct echo)",
  );
  const diff = (r: Round) => r.overhead.this - r.overhead.baseline;
  const gain = (r: Round) => r.rate32.this / r.rate32.baseline - 1;
  log(
    table(
      [
        "round",
        "first",
        "overhead baseline / this ms",
        "this − baseline ms",
        "p99 c=1 baseline / this ms",
        "c=32 baseline / this /s",
        "c=32 change",
        "WAL/execute c=32 baseline / this kB",
        "CPU/execute c=32 service baseline / this ms",
        "postgres baseline / this ms",
        "steal % baseline / this",
      ],
      [
        ...rounds.map((r, i) => [
          String(i + 1),
          r.first,
          `${fixed(r.overhead.baseline, 3)} / ${fixed(r.overhead.this, 3)}`,
          fixed(diff(r), 3),
          `${fixed(r.p99.baseline, 2)} / ${fixed(r.p99.this, 2)}`,
          `${fixed(r.rate32.baseline, 0)} / ${fixed(r.rate32.this, 0)}`,
          `${fixed(100 * gain(r), 1)} %`,
          `${fixed(r.wal32.baseline / 1024, 2)} / ${fixed(r.wal32.this / 1024, 2)}`,
          `${fixed(r.cpu32.baseline.service, 3)} / ${fixed(r.cpu32.this.service, 3)}`,
          `${fixed(r.cpu32.baseline.postgres, 3)} / ${fixed(r.cpu32.this.postgres, 3)}`,
          `${fixed(r.cpu32.baseline.stealPct, 1)} / ${fixed(r.cpu32.this.stealPct, 1)}`,
        ]),
        [
          "median",
          "",
          `${fixed(median(rounds.map((r) => r.overhead.baseline)), 3)} / ${fixed(median(rounds.map((r) => r.overhead.this)), 3)}`,
          fixed(median(rounds.map(diff)), 3),
          `${fixed(median(rounds.map((r) => r.p99.baseline)), 2)} / ${fixed(median(rounds.map((r) => r.p99.this)), 2)}`,
          `${fixed(median(rounds.map((r) => r.rate32.baseline)), 0)} / ${fixed(median(rounds.map((r) => r.rate32.this)), 0)}`,
          `${fixed(100 * median(rounds.map(gain)), 1)} %`,
          `${fixed(median(rounds.map((r) => r.wal32.baseline)) / 1024, 2)} / ${fixed(median(rounds.map((r) => r.wal32.this)) / 1024, 2)}`,
          `${fixed(median(rounds.map((r) => r.cpu32.baseline.service)), 3)} / ${fixed(median(rounds.map((r) => r.cpu32.this.service)), 3)}`,
          `${fixed(median(rounds.map((r) => r.cpu32.baseline.postgres)), 3)} / ${fixed(median(rounds.map((r) => r.cpu32.this.postgres)), 3)}`,
          "",
        ],
      ],
    ),
  );
  log(
    `this checkout's overhead was lower in ${rounds.filter((r) => diff(r) < 0).length} of ${rounds.length} rounds, ` +
      `its p99 at c=1 lower in ${rounds.filter((r) => r.p99.this < r.p99.baseline).length} of ${rounds.length}, ` +
      `its c=32 rate higher in ${rounds.filter((r) => gain(r) > 0).length} of ${rounds.length}, ` +
      `its service's CPU per c=32 execute lower in ${rounds.filter((r) => r.cpu32.this.service < r.cpu32.baseline.service).length} of ${rounds.length}`,
  );
  // Going first in a round has measured an advantage of its own at c=1 (0.05–0.08 ms in an A/A of one
  // build against itself): the mean of each order's mean difference cancels it.
  const byOrder = (first: Side) => rounds.filter((r) => r.first === first).map(diff);
  if (byOrder("this").length && byOrder("baseline").length) {
    const thisFirst = mean(byOrder("this"));
    const baselineFirst = mean(byOrder("baseline"));
    log(
      `order-balanced c=1 difference (this − baseline): ${fixed((thisFirst + baselineFirst) / 2, 3)} ms ` +
        `(this first: ${fixed(thisFirst, 3)}, baseline first: ${fixed(baselineFirst, 3)}; ` +
        `the advantage of going first: ${fixed((baselineFirst - thisFirst) / 2, 3)} ms)`,
    );
  }
}

await runBench(run, () => children);
