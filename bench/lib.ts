import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { Socket } from "node:net";
import os from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import pg from "pg";

/**
 * Helpers for the benchmarks: choosing the infrastructure, running the all-in-one service as a child
 * process, driving load with autocannon and accounting for CPU while it runs.
 */

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const ALL_IN_ONE = fileURLToPath(new URL("../api/all-in-one.js", import.meta.url));
const LOCAL_PG = { host: "127.0.0.1", port: 5432, user: "postgres" } as const;
const LOCAL_REDIS = { host: "127.0.0.1", port: 6379 } as const;
const BENCH_DATABASE = "agentmarket_bench";
const BENCH_QUEUE_PREFIX = "{ambench}";

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------
// Infrastructure

export interface Infra {
  env: Record<string, string>;
  postgres: string;
  redis: string;
}

/** Connects as postgres to the local server and creates the bench database; false when none answers. */
async function ensureLocalDatabase(): Promise<boolean> {
  const client = new pg.Client({ ...LOCAL_PG, database: "postgres", connectionTimeoutMillis: 2000 });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch {
    return false;
  }
  try {
    const found = await client.query("select 1 from pg_database where datname = $1", [BENCH_DATABASE]);
    if (found.rowCount === 0) await client.query(`create database "${BENCH_DATABASE}"`);
    return true;
  } finally {
    await client.end();
  }
}

/** A bare RESP PING, so that probing needs no client library and gives up fast. */
function redisAnswers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("error", () => done(false));
    socket.once("data", (data) => done(data.toString().startsWith("+PONG")));
    socket.connect(port, host, () => socket.write("PING\r\n"));
  });
}

/**
 * BENCH_* URLs win; then a PostgreSQL / Redis on their default local ports; else nothing, and the
 * service starts its embedded ones (slower to start, but the bench still runs anywhere).
 */
export async function resolveInfra(env: NodeJS.ProcessEnv = process.env): Promise<Infra> {
  const out: Record<string, string> = {};
  let postgres = "embedded (started by the service)";
  let redis = "local redis-server child (started by the service)";
  if (env.BENCH_DATABASE_URL) {
    out.DATABASE_URL = env.BENCH_DATABASE_URL;
    postgres = "BENCH_DATABASE_URL";
  } else if (await ensureLocalDatabase()) {
    out.DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${BENCH_DATABASE}`;
    postgres = `127.0.0.1:5432/${BENCH_DATABASE}`;
  } else {
    // Keep bench rows out of the developer's own `npm start` data directory.
    out.EMBEDDED_DATA_DIR = env.EMBEDDED_DATA_DIR ?? ".data/bench";
  }
  if (env.BENCH_REDIS_URL) {
    out.REDIS_URL = env.BENCH_REDIS_URL;
    redis = "BENCH_REDIS_URL";
  } else if (await redisAnswers(LOCAL_REDIS.host, LOCAL_REDIS.port)) {
    out.REDIS_URL = `redis://${LOCAL_REDIS.host}:${LOCAL_REDIS.port}`;
    redis = `${LOCAL_REDIS.host}:${LOCAL_REDIS.port}`;
  }
  // A shared Redis must not mix bench jobs with anyone else's queues.
  if (out.REDIS_URL) {
    out.QUEUE_PREFIX = BENCH_QUEUE_PREFIX;
    redis += `, QUEUE_PREFIX=${BENCH_QUEUE_PREFIX}`;
  }
  return { env: out, postgres, redis };
}

/** A PostgreSQL server for benchmarks that talk to the database directly rather than through the service. */
export interface PostgresServer {
  /** Where it is, for the output (host:port, never a password). */
  label: string;
  /** A database on that server to connect to for create / drop database. */
  adminUrl: string;
  /** The URL of the named database on that server. */
  url(database: string): string;
}

/** The same server and credentials as url, with another database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${encodeURIComponent(database)}`;
  return parsed.toString();
}

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on("error", () => {});
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * The server resolveInfra would choose, without the embedded fallback: BENCH_DATABASE_URL's server,
 * else the local one on 5432 as postgres; undefined when neither answers. `avoid` is the bench's own
 * database, never used as the admin connection (it is the one being dropped).
 */
export async function resolvePostgresServer(
  avoid: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<PostgresServer | undefined> {
  const given = env.BENCH_DATABASE_URL;
  const base = given ?? `postgres://${LOCAL_PG.user}@${LOCAL_PG.host}:${LOCAL_PG.port}/postgres`;
  const parsed = new URL(base);
  const own = decodeURIComponent(parsed.pathname.replace(/^\//, ""));
  const adminUrl = own && own !== avoid ? base : withDatabase(base, "postgres");
  if (!(await postgresAnswers(adminUrl))) {
    if (given) throw new Error(`BENCH_DATABASE_URL: no answer from PostgreSQL at ${parsed.host}`);
    return undefined;
  }
  return {
    label: given ? `BENCH_DATABASE_URL (${parsed.host})` : `${LOCAL_PG.host}:${LOCAL_PG.port}`,
    adminUrl,
    url: (database) => withDatabase(base, database),
  };
}

// ---------------------------------------------------------------------------------------------------
// The service under test

/** Inherited variables that would point the service elsewhere than the bench decided. */
const OVERRIDDEN = [
  "DATABASE_URL",
  "REDIS_URL",
  "QUEUE_PREFIX",
  "PORT",
  "HOST",
  "PUBLIC_BASE_URL",
  "FIRST_PARTY_BASE_URL",
  "LOG_LEVEL",
];

export interface Service {
  baseUrl: string;
  pid: number;
  /** Lines the service printed (LOG_LEVEL=warn, so each one is a warning or worse). */
  lines(): readonly string[];
  /** How many lines it has printed in all (lines() keeps only the last ones). */
  lineCount(): number;
  hasExited(): boolean;
  stop(): Promise<void>;
  /** Synchronous last resort for process "exit": kills the whole process group. */
  killNow(): void;
}

const TAIL_LINES = 200;

export function startService(port: number, extraEnv: Record<string, string>): Service {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of OVERRIDDEN) delete env[name];
  Object.assign(env, extraEnv, { PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn" });
  // Own process group, so an embedded PostgreSQL / redis-server can be killed along with the service.
  const child: ChildProcess = spawn(process.execPath, [ALL_IN_ONE], {
    cwd: REPO_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const lines: string[] = [];
  let lineCount = 0;
  const keep = (line: string) => {
    lineCount += 1;
    lines.push(line);
    if (lines.length > TAIL_LINES) lines.shift();
  };
  for (const stream of [child.stdout, child.stderr])
    if (stream) createInterface({ input: stream }).on("line", keep);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exited = true;
      keep(`[bench] service exited (code ${code}, signal ${signal})`);
      resolve();
    });
    child.once("error", (err) => {
      exited = true;
      keep(`[bench] could not start the service: ${err.message}`);
      resolve();
    });
  });
  const pid = child.pid ?? -1;
  const killGroup = () => {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // Nothing left in the group.
    }
  };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    pid,
    lines: () => lines,
    lineCount: () => lineCount,
    hasExited: () => exited,
    async stop() {
      // SIGTERM to the service alone lets it drain and stop its embedded databases in order.
      if (!exited) child.kill("SIGTERM");
      await Promise.race([exit, sleep(15_000)]);
      killGroup();
    },
    killNow: () => {
      if (pid > 0) killGroup();
    },
  };
}

export async function waitForHealth(service: Service, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (service.hasExited()) throw new Error("the service exited before it was healthy");
    try {
      const res = await fetch(`${service.baseUrl}/api/health`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return;
      last = `${res.status} ${(await res.text()).slice(0, 300)}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(250);
  }
  throw new Error(`GET /api/health not 200 within ${timeoutMs / 1000} s (last: ${last})`);
}

/** One JSON request outside the load runs: registration and the pre-flight sanity checks. */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: keep the text for the error message.
  }
  return { status: res.status, json };
}

// ---------------------------------------------------------------------------------------------------
// CPU accounting (Linux /proc; elsewhere only the machine-wide figure is available)

type ProcTicks = Map<number, { comm: string; user: number; sys: number }>;

function clockTicksPerSecond(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;
  } catch {
    return 100;
  }
}

const CLK_TCK = clockTicksPerSecond();

function readProcs(): ProcTicks {
  const procs: ProcTicks = new Map();
  let entries: string[];
  try {
    entries = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return procs;
  }
  for (const entry of entries) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // comm may contain spaces and parentheses; the fields after the last ")" are fixed.
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      procs.set(Number(entry), { comm, user: Number(fields[11]), sys: Number(fields[12]) });
    } catch {
      // The process ended between readdir and read.
    }
  }
  return procs;
}

function machineTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const cpu of os.cpus()) {
    const t = cpu.times;
    busy += t.user + t.nice + t.sys + t.irq;
    total += t.user + t.nice + t.sys + t.irq + t.idle;
  }
  return { busy, total };
}

/** CPU used during a run, in cores (1.0 = one core busy the whole time). */
export interface CpuUse {
  service: number;
  /** The service's kernel (system) time, in cores: socket writes to PostgreSQL, Redis and clients. */
  serviceSys: number;
  postgres: number;
  redis: number;
  bench: number;
  /** Everything else on the machine (other processes, kernel threads), in cores. */
  other: number;
  /** The busiest other processes, so that a noisy neighbour is visible in the output. */
  busiestOthers: { comm: string; cores: number }[];
  machineBusyPct: number;
}

export interface CpuMeter {
  stop(): CpuUse;
}

export function startCpuMeter(servicePid: number): CpuMeter {
  const started = performance.now();
  const before = readProcs();
  const machineBefore = machineTimes();
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const after = readProcs();
      const machineAfter = machineTimes();
      const cores = (ticks: number) => ticks / CLK_TCK / seconds;
      const use = { service: 0, serviceSys: 0, postgres: 0, redis: 0, bench: 0 };
      const others = new Map<string, number>();
      for (const [pid, now] of after) {
        const prior = before.get(pid);
        // A pid seen for the first time started during the run: all its time belongs to the run.
        const base = prior && prior.comm === now.comm ? prior : { user: 0, sys: 0 };
        const used = cores(now.user - base.user + now.sys - base.sys);
        if (pid === servicePid) {
          use.service += used;
          use.serviceSys += cores(now.sys - base.sys);
        } else if (pid === process.pid) use.bench += used;
        else if (now.comm === "postgres") use.postgres += used;
        else if (now.comm.startsWith("redis-server")) use.redis += used;
        else others.set(now.comm, (others.get(now.comm) ?? 0) + used);
      }
      const busy = machineAfter.busy - machineBefore.busy;
      const total = machineAfter.total - machineBefore.total;
      const busyCores = total > 0 ? (busy / total) * os.cpus().length : 0;
      const accounted = use.service + use.postgres + use.redis + use.bench;
      const busiestOthers = [...others]
        .filter(([, cores]) => cores >= 0.05)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([comm, cores]) => ({ comm, cores }));
      return {
        ...use,
        other: Math.max(0, busyCores - accounted),
        busiestOthers,
        machineBusyPct: total > 0 ? (100 * busy) / total : 0,
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Load

export interface LoadSpec {
  scenario: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  seconds: number;
}

export interface Measurement {
  scenario: string;
  connections: number;
  p50Ms: number;
  p99Ms: number;
  okPerSecond: number;
  ok: number;
  /** 2xx answers that are not the 200 result, e.g. 202 "still running" from /api/execute. */
  other2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  errorSamples: string[];
  durationS: number;
  cpu: CpuUse;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

function statusCounts(result: autocannon.Result): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) counts[code] = stat.count ?? 0;
  return counts;
}

function runAutocannon(
  options: autocannon.Options,
  onResponse: (status: number, ms: number) => void,
  onError: (err: unknown) => void,
): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (err, result) => (err ? reject(err) : resolve(result)));
    instance.on("response", (_client, status, _bytes, ms) => onResponse(status, ms));
    instance.on("reqError", onError);
  });
}

/**
 * Drives one scenario. Latencies are collected from autocannon's per-response event rather than its
 * histogram, whose whole-millisecond buckets are too coarse for sub-millisecond echo calls. Only 200
 * answers count towards latency and throughput: a fast error must not look like a fast success.
 */
export async function measure(spec: LoadSpec, servicePid: number): Promise<Measurement> {
  const latencies: number[] = [];
  const errorSamples = new Set<string>();
  const meter = startCpuMeter(servicePid);
  const result = await runAutocannon(
    {
      url: spec.url,
      method: "POST",
      headers: spec.headers,
      body: spec.body,
      connections: spec.connections,
      duration: spec.seconds,
    },
    (status, ms) => {
      if (status === 200) latencies.push(ms);
    },
    (err) => {
      if (errorSamples.size < 5) errorSamples.add(String((err as Error)?.message ?? err));
    },
  );
  const cpu = meter.stop();
  const sorted = Float64Array.from(latencies).sort();
  const statusCodes = statusCounts(result);
  const other2xx = Object.entries(statusCodes)
    .filter(([code]) => code !== "200" && code.startsWith("2"))
    .reduce((sum, [, n]) => sum + n, 0);
  return {
    scenario: spec.scenario,
    connections: spec.connections,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    okPerSecond: latencies.length / result.duration,
    ok: latencies.length,
    other2xx,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    errorSamples: [...errorSamples],
    durationS: result.duration,
    cpu,
  };
}

/** A fixed number of requests to warm connections, JIT, caches and the database pool. */
export async function warmUp(spec: Omit<LoadSpec, "seconds">, amount: number): Promise<void> {
  await runAutocannon(
    {
      url: spec.url,
      method: "POST",
      headers: spec.headers,
      body: spec.body,
      connections: spec.connections,
      amount,
    },
    () => {},
    () => {},
  );
}

// ---------------------------------------------------------------------------------------------------
// Output

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export const fixed = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");
