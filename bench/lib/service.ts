import { type ChildProcess, spawn } from "node:child_process";
import { isAbsolute, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { SERVICE_NODE_FLAGS } from "../../shared/infra/node-flags.js";
import { LineTally } from "./output.js";

// The service under test: the all-in-one process, or the Procfile's processes, started as children
// with their health awaited.

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const ALL_IN_ONE = fileURLToPath(new URL("../../api/all-in-one.js", import.meta.url));

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Inherited variables that would point the service elsewhere than the bench decided. */
export const OVERRIDDEN = [
  "DATABASE_URL",
  "REDIS_URL",
  "QUEUE_PREFIX",
  "PORT",
  "HOST",
  "PUBLIC_BASE_URL",
  "FIRST_PARTY_BASE_URL",
  "LOG_LEVEL",
  // Several worker copies on one machine would all try to bind the same metrics port.
  "WORKER_METRICS_PORT",
];

export interface Service {
  baseUrl: string;
  pid: number;
  /** Lines the service printed (LOG_LEVEL=warn, so each one is a warning or worse). */
  lines(): readonly string[];
  /** How many lines it has printed in all (lines() keeps only the last ones). */
  lineCount(): number;
  hasExited(): boolean;
  /** Resolves with the exit code (null when a signal ended it or it never started). */
  whenExited(): Promise<number | null>;
  stop(): Promise<void>;
  /** Synchronous last resort for process "exit": kills the whole process group. */
  killNow(): void;
}

export const TAIL_LINES = 200;

/** A compiled entry point of this repository started as a bench child. */
export interface ChildSpec {
  /** The script under dist/, relative to the repository root (e.g. "dist/api/main.js"). */
  script: string;
  args?: string[];
  /** Node's own flags, before the script (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Where its HTTP API listens, if it has one (baseUrl is empty otherwise). */
  port?: number;
  /** Merged over the bench's environment, after the OVERRIDDEN variables are removed. */
  env: Record<string, string>;
  /** Sees every line the child prints (stdout and stderr), e.g. to count warnings over a long run. */
  onLine?: (line: string) => void;
}

/**
 * The all-in-one service (API and every worker in one process), the subject of most benchmarks, with
 * the node flags npm start gives it.
 */
export function startService(
  port: number,
  extraEnv: Record<string, string>,
  onLine?: (line: string) => void,
  nodeArgs: string[] = [],
): Service {
  return startChild({
    script: ALL_IN_ONE,
    port,
    env: extraEnv,
    onLine,
    nodeArgs: [...SERVICE_NODE_FLAGS, ...nodeArgs],
  });
}

/**
 * Starts a child in its own process group (so that whatever it starts, e.g. an embedded PostgreSQL or
 * redis-server, can be killed with it), bound to 127.0.0.1 and logging at warn (unless its own env names
 * a LOG_LEVEL, as bench:ab's BENCH_AB_ENV and BENCH_AB_THIS_ENV can).
 */
export function startChild(spec: ChildSpec): Service {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of OVERRIDDEN) delete env[name];
  Object.assign(env, spec.env, { HOST: "127.0.0.1", LOG_LEVEL: spec.env.LOG_LEVEL ?? "warn" });
  if (spec.port !== undefined) env.PORT = String(spec.port);
  const script = isAbsolute(spec.script) ? spec.script : join(REPO_ROOT, spec.script);
  const child: ChildProcess = spawn(
    process.execPath,
    [...(spec.nodeArgs ?? []), script, ...(spec.args ?? [])],
    {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  const lines: string[] = [];
  let lineCount = 0;
  const keep = (line: string) => {
    lineCount += 1;
    lines.push(line);
    if (lines.length > TAIL_LINES) lines.shift();
    spec.onLine?.(line);
  };
  for (const stream of [child.stdout, child.stderr])
    if (stream) createInterface({ input: stream }).on("line", keep);
  let exited = false;
  const exit = new Promise<number | null>((resolve) => {
    child.once("exit", (code, signal) => {
      exited = true;
      keep(`[bench] service exited (code ${code}, signal ${signal})`);
      resolve(code);
    });
    child.once("error", (err) => {
      exited = true;
      keep(`[bench] could not start the service: ${err.message}`);
      resolve(null);
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
    baseUrl: spec.port === undefined ? "" : `http://127.0.0.1:${spec.port}`,
    pid,
    lines: () => lines,
    lineCount: () => lineCount,
    hasExited: () => exited,
    whenExited: () => exit,
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

/** A fresh buyer agent and its API key (POST /api/quickstart). */
export async function register(baseUrl: string): Promise<string> {
  const res = await postJson(`${baseUrl}/api/quickstart`, { name: "bench-agent", intent: "buyer" });
  if (res.status !== 201 || typeof res.json?.api_key !== "string") {
    throw new Error(`POST /api/quickstart answered ${res.status}: ${JSON.stringify(res.json)}`);
  }
  return res.json.api_key;
}

/**
 * Kills the children however the bench ends: normal exit, thrown error or Ctrl-C. `children` is read
 * when it happens, so a bench may start and stop children as it goes.
 */
export function guardChildren(children: () => Iterable<Service>): void {
  process.on("exit", () => {
    for (const child of children()) child.killNow();
  });
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      process.stdout.write(`\n${signal}: stopping the children\n`);
      const stops = [...children()].map((child) => child.stop());
      void Promise.all(stops).finally(() => process.exit(130));
    });
  }
}

/**
 * A bench's main: guards its children, runs the bench, prints each child's last lines if it broke (exit
 * code 1), always stops the children (beforeStop first, e.g. to stop tallying their lines), and exits:
 * keep-alive sockets and timers of the load generator must not hold the process open.
 */
export async function runBench(
  run: () => Promise<void>,
  children: () => Iterable<Service>,
  beforeStop?: () => void,
): Promise<never> {
  guardChildren(children);
  try {
    await run();
  } catch (error) {
    process.stdout.write(`!!!!! benchmark failed: ${(error as Error).message}\n`);
    for (const child of children()) {
      const tail = child.lines().slice(-30);
      if (tail.length === 0) continue;
      process.stdout.write(`last lines from pid ${child.pid}:\n${tail.map((l) => `  ${l}\n`).join("")}`);
    }
    process.exitCode = 1;
  } finally {
    beforeStop?.();
    await Promise.all([...children()].map((child) => child.stop()));
  }
  process.exit(process.exitCode ?? 0);
}

/** Tallies a child's lines from now on (reportOutput prints the tally). */
export function tallySince(child: Service, linesBefore: number): LineTally {
  const tally = new LineTally();
  const during = child.lineCount() - linesBefore;
  for (const line of during > 0 ? child.lines().slice(-during) : []) tally.add(line);
  return tally;
}
