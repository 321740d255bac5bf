import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

// The service under test: the all-in-one process started as a child, with its health awaited.

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

export const TAIL_LINES = 200;

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
