import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createInterface } from "node:readline";
import {
  type EchoSpec,
  fixed,
  log,
  loud,
  postJson,
  sleep,
  table,
  withDatabase,
  withPgClient,
} from "../lib.js";

/**
 * Round trips per execute, counted after the timed runs (never during them: MONITOR slows Redis
 * down): N sequential executes per kind, and for each window
 *
 * - PostgreSQL transactions and rows from pg_stat_database (xact_commit, tup_inserted, tup_updated of
 *   the bench database), read from another database so the reads do not count themselves;
 * - the write-ahead log written meanwhile (pg_current_wal_lsn; server-wide, so anything else the server
 *   runs counts too): what each durable commit waits to flush;
 * - PostgreSQL statements from the service's own `agentmarket_db_statements_total` (knex's query
 *   event, BEGIN and COMMIT included), minus what one /metrics scrape itself runs, and its round trips:
 *   those statements less `agentmarket_db_statements_pipelined_total` (sent in another's flight);
 * - Redis round trips and commands from `redis-cli MONITOR`, kept to the service's own connections
 *   (its sockets to Redis, read from /proc). A line "[<db> lua]" is a command run inside a script: a
 *   command, not a round trip. A MULTI … EXEC block is one round trip; other pipelines would count
 *   once per command, so the round trips are an upper bound.
 *
 * Background work (sweepers, schedulers, BullMQ's idle polls and stalled-job checks) runs all the
 * time and is included; an idle window measured first gives its rate, printed beside the figures.
 * PostgreSQL reports a backend's counters at most once a second and an idle backend's up to 10 s
 * later, so every read of pg_stat_database waits STATS_SETTLE_MS after the work it should see.
 */

export const STATS_SETTLE_MS = 11_000;
const IDLE_WINDOW_MS = 11_000;

export interface CountPlan {
  label: string;
  spec: EchoSpec;
  requests: number;
  /** The answer is the one expected (checked on every request). */
  check(json: any): boolean;
}

export interface CountContext {
  baseUrl: string;
  servicePid: number;
  databaseUrl: string;
  redisUrl: string | undefined;
}

interface PgCounters {
  xacts: number;
  inserted: number;
  updated: number;
  /** Bytes of write-ahead log, server-wide. */
  wal: number;
}

interface Window {
  label: string;
  requests: number;
  startedAt: number;
  endedAt: number;
  pg: PgCounters;
  statements: number;
  /** PostgreSQL round trips: statements less those sent in another's flight. */
  roundTrips: number;
  redis: { roundTrips: number; commands: number } | undefined;
}

/** The database's commit and row counters, and the server's WAL position in bytes. */
export async function readPg(adminUrl: string, database: string): Promise<PgCounters> {
  const { rows } = await withPgClient(adminUrl, (client) =>
    client.query(
      `select xact_commit, tup_inserted, tup_updated, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') as wal
         from pg_stat_database where datname = $1`,
      [database],
    ),
  );
  const row = rows[0];
  if (!row) throw new Error(`pg_stat_database has no row for ${database}`);
  return {
    xacts: Number(row.xact_commit),
    inserted: Number(row.tup_inserted),
    updated: Number(row.tup_updated),
    wal: Number(row.wal),
  };
}

const minus = (a: PgCounters, b: PgCounters): PgCounters => ({
  xacts: a.xacts - b.xacts,
  inserted: a.inserted - b.inserted,
  updated: a.updated - b.updated,
  wal: a.wal - b.wal,
});

/**
 * The service's statement counters from its /metrics (METRICS_TOKEN sent when set): all statements, and
 * those sent in another's flight (shared/db/pipeline.ts), so that their difference is the round trips.
 */
async function readStatements(baseUrl: string): Promise<{ statements: number; pipelined: number }> {
  const token = process.env.METRICS_TOKEN;
  const res = await fetch(`${baseUrl}/metrics`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(10_000),
  });
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status} (METRICS_TOKEN?)`);
  const text = await res.text();
  const counter = (name: string) => {
    const value = new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+(\\S+)`, "m").exec(text)?.[1];
    if (value === undefined) throw new Error(`/metrics has no ${name}`);
    return Number(value);
  };
  return {
    statements: counter("agentmarket_db_statements_total"),
    pipelined: counter("agentmarket_db_statements_pipelined_total"),
  };
}

/** The local ports of a process's TCP connections to `port` (its Redis clients), from /proc. */
function clientPorts(pid: number, port: number): Set<number> {
  const inodes = new Set<string>();
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (match) inodes.add(match[1]!);
      } catch {
        // Closed meanwhile.
      }
    }
  } catch {
    return new Set();
  }
  const ports = new Set<number>();
  for (const file of ["tcp", "tcp6"]) {
    let text = "";
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || !inodes.has(f[9]!)) continue;
      const local = Number.parseInt(f[1]!.split(":")[1]!, 16);
      const remote = Number.parseInt(f[2]!.split(":")[1]!, 16);
      if (remote === port) ports.add(local);
    }
  }
  return ports;
}

interface MonitorLine {
  at: number;
  /** "lua" for a command run inside a script; else the client's port. */
  client: number | "lua";
  command: string;
}

/** `redis-cli MONITOR` as a child, its lines parsed as they come. */
function startMonitor(redisUrl: string): { lines: MonitorLine[]; ready: Promise<void>; stop(): void } {
  const url = new URL(redisUrl);
  const args = ["-h", url.hostname, "-p", url.port || "6379"];
  if (url.password) args.push("-a", decodeURIComponent(url.password), "--no-auth-warning");
  const child: ChildProcess = spawn("redis-cli", [...args, "MONITOR"], { stdio: ["ignore", "pipe", "pipe"] });
  const lines: MonitorLine[] = [];
  let resolveReady: () => void = () => {};
  let rejectReady: (err: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    resolveReady = resolve;
    rejectReady = reject;
  });
  child.once("error", (err) => rejectReady(new Error(`redis-cli MONITOR: ${err.message}`)));
  child.once("exit", (code) => rejectReady(new Error(`redis-cli MONITOR exited (${code})`)));
  const killNow = () => child.kill("SIGKILL");
  process.once("exit", killNow);
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line === "OK") return resolveReady();
    const m = /^(\d+\.\d+) \[\d+ (lua|[^\]]*:(\d+))\] "([^"]*)"/.exec(line);
    if (!m) return;
    lines.push({ at: Number(m[1]) * 1000, client: m[2] === "lua" ? "lua" : Number(m[3]), command: m[4]! });
  });
  return {
    lines,
    ready,
    stop() {
      killNow();
      process.removeListener("exit", killNow);
    },
  };
}

/** Round trips and commands of the service's clients between two wall-clock times (ms). */
function countRedis(lines: readonly MonitorLine[], own: Set<number>, from: number, to: number) {
  let roundTrips = 0;
  let commands = 0;
  let ownerIsService = false;
  let inMulti = false;
  for (const line of lines) {
    if (line.client !== "lua") ownerIsService = own.has(line.client);
    if (line.at < from || line.at > to || !ownerIsService) continue;
    commands += 1;
    if (line.client === "lua") continue;
    const command = line.command.toLowerCase();
    if (command === "multi") inMulti = true;
    else if (command === "exec") inMulti = false;
    if (!inMulti || command === "multi") roundTrips += 1;
  }
  return { roundTrips, commands };
}

async function runSequential(plan: CountPlan): Promise<void> {
  for (let i = 0; i < plan.requests; i++) {
    const res = await postJson(plan.spec.url, JSON.parse(plan.spec.body), plan.spec.headers);
    if (res.status !== 200 || !plan.check(res.json))
      throw new Error(
        `round trips, ${plan.label}: request ${i + 1} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 400)}`,
      );
  }
}

/**
 * Counts, in order: an idle window (the background's rate), then each plan's N sequential executes,
 * and prints one table and the summary lines. Redis is skipped (said so) when the service runs its
 * own redis-server, whose address the bench does not know.
 */
export async function countRoundTrips(ctx: CountContext, plans: readonly CountPlan[]): Promise<void> {
  const database = decodeURIComponent(new URL(ctx.databaseUrl).pathname.slice(1));
  const adminUrl = withDatabase(ctx.databaseUrl, "postgres");
  const redisPort = ctx.redisUrl ? Number(new URL(ctx.redisUrl).port || 6379) : undefined;
  log(
    `counting round trips: an idle window of ${IDLE_WINDOW_MS / 1000} s, then ` +
      `${plans.map((p) => `${p.requests} sequential ${p.label}`).join(", ")} ` +
      `(each PostgreSQL read waits ${STATS_SETTLE_MS / 1000} s for its statistics)…`,
  );
  // The fewest of five back-to-back pairs: background work that lands between two scrapes (the tail of
  // the load just measured) must not count as a scrape's own cost.
  let scrapeCost = Number.POSITIVE_INFINITY;
  let scrapePipelined = 0;
  for (let i = 0; i < 5; i++) {
    const s0 = await readStatements(ctx.baseUrl);
    const s1 = await readStatements(ctx.baseUrl);
    if (s1.statements - s0.statements < scrapeCost) {
      scrapeCost = s1.statements - s0.statements;
      scrapePipelined = s1.pipelined - s0.pipelined;
    }
  }
  const monitor = ctx.redisUrl ? startMonitor(ctx.redisUrl) : undefined;
  const own = new Set<number>();
  const noteClients = () => {
    if (redisPort !== undefined) for (const p of clientPorts(ctx.servicePid, redisPort)) own.add(p);
  };
  try {
    await monitor?.ready;
    noteClients();
    await sleep(STATS_SETTLE_MS);
    const windows: Window[] = [];
    let pgBefore = await readPg(adminUrl, database);
    let statementsBefore = await readStatements(ctx.baseUrl);
    let startedAt = Date.now();
    const close = async (label: string, requests: number, settled: boolean) => {
      const endedAt = Date.now();
      if (settled) await sleep(STATS_SETTLE_MS);
      const pgAfter = await readPg(adminUrl, database);
      const statementsAfter = await readStatements(ctx.baseUrl);
      noteClients();
      windows.push({
        label,
        requests,
        startedAt,
        endedAt,
        pg: minus(pgAfter, pgBefore),
        statements: statementsAfter.statements - statementsBefore.statements - scrapeCost,
        roundTrips:
          statementsAfter.statements -
          statementsBefore.statements -
          scrapeCost -
          (statementsAfter.pipelined - statementsBefore.pipelined - scrapePipelined),
        redis: monitor ? { roundTrips: 0, commands: 0 } : undefined,
      });
      pgBefore = pgAfter;
      statementsBefore = statementsAfter;
      startedAt = Date.now();
    };
    await sleep(IDLE_WINDOW_MS);
    await close("idle (background only)", 0, false);
    for (const plan of plans) {
      await runSequential(plan);
      await close(plan.label, plan.requests, true);
    }
    monitor?.stop();
    for (const w of windows) if (monitor) w.redis = countRedis(monitor.lines, own, w.startedAt, w.endedAt);
    report(windows, scrapeCost, Boolean(monitor));
  } finally {
    monitor?.stop();
  }
}

function report(windows: Window[], scrapeCost: number, withRedis: boolean): void {
  const idle = windows[0]!;
  const idleSeconds = (idle.endedAt - idle.startedAt) / 1000;
  const rate = (n: number) => n / idleSeconds;
  const rows = windows.map((w) => {
    // The idle row per second; an execute's per execute.
    const n = w.requests || idleSeconds;
    const per = (x: number) => fixed(x / n, 1);
    return [
      w.requests ? `${w.label}, per execute (N=${w.requests})` : `${w.label}, per second`,
      per(w.statements),
      per(w.roundTrips),
      per(w.pg.xacts),
      per(w.pg.inserted),
      per(w.pg.updated),
      fixed(w.pg.wal / n / 1024, 1),
      w.redis ? per(w.redis.roundTrips) : "n/a",
      w.redis ? per(w.redis.commands) : "n/a",
    ];
  });
  log();
  log("Round trips per execute (sequential executes; background work included, its rate in the idle row)");
  log(
    table(
      [
        "window",
        "pg statements",
        "pg round trips",
        "pg transactions",
        "rows inserted",
        "rows updated",
        "WAL kB",
        "redis round trips",
        "redis commands",
      ],
      rows,
    ),
  );
  log(
    `  one /metrics scrape runs ${scrapeCost} statements (subtracted); an execute window's PostgreSQL ` +
      `figures span its executes and the ${STATS_SETTLE_MS / 1000} s settle wait after them, its Redis ` +
      "figures the executes only",
  );
  if (!withRedis)
    loud("Redis not counted: the service runs its own redis-server (set BENCH_REDIS_URL or run one on 6379)");
  for (const w of windows.slice(1)) {
    const n = w.requests;
    const pgSeconds = (w.endedAt - w.startedAt + STATS_SETTLE_MS) / 1000;
    const redisSeconds = (w.endedAt - w.startedAt) / 1000;
    const background = (perSecond: number, seconds: number) => fixed((rate(perSecond) * seconds) / n, 1);
    log(
      `  ${w.label}: round trips per execute: PostgreSQL ${fixed(w.roundTrips / n, 1)} ` +
        `(${fixed(w.statements / n, 1)} statements, ${fixed(w.pg.xacts / n, 1)} transactions), Redis ` +
        (w.redis
          ? `${fixed(w.redis.roundTrips / n, 1)} round trips (${fixed(w.redis.commands / n, 1)} commands incl. inside scripts)`
          : "not counted"),
    );
    log(
      `    background work included, at the idle rate: ≈ ${background(idle.statements, pgSeconds)} statements, ` +
        `${background(idle.pg.xacts, pgSeconds)} transactions` +
        (w.redis && idle.redis
          ? `, ${background(idle.redis.roundTrips, redisSeconds)} Redis round trips`
          : "") +
        " per execute",
    );
  }
}
