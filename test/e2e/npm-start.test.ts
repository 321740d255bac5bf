import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../shared/infra/free-port.js";
import { waitFor } from "../helpers/processes.js";

// `npm start` as a user runs it: through npm, with no DATABASE_URL or REDIS_URL, so it starts its own
// embedded PostgreSQL and redis-server. Each test records every descendant of the npm process while
// the service runs, signals it, and asserts that all of them are gone once npm has exited.

const dataDirs: string[] = [];
afterAll(() => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

interface Started {
  npm: ChildProcess;
  output(): string;
  /** Sends a stop (to npm, or to its group) and notes when, so the stop can be timed. */
  stop(send: (pid: number) => void): void;
  exited: Promise<{ code: number | null; afterMs: number }>;
}

/** Starts `npm start` in a process group of its own (as a terminal would), the build already done. */
function npmStart(env: Record<string, string>): Started {
  const dir = mkdtempSync(join(tmpdir(), "am-npm-start-"));
  // Run as root, embedded PostgreSQL drops to the `postgres` user, which must be able to enter the dir.
  chmodSync(dir, 0o755);
  dataDirs.push(dir);
  const base = { ...process.env };
  for (const name of ["DATABASE_URL", "REDIS_URL", "DEV_CHAIN", "DEV_CHAIN_PORT"]) delete base[name];
  const npm = spawn("npm", ["start", "--ignore-scripts", "--silent"], {
    env: { ...base, EMBEDDED_DATA_DIR: dir, LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  npm.stdout?.on("data", (d) => {
    output += d;
  });
  npm.stderr?.on("data", (d) => {
    output += d;
  });
  let stoppedAt = Date.now();
  const exited = new Promise<{ code: number | null; afterMs: number }>((resolve) =>
    npm.once("exit", (code) => resolve({ code, afterMs: Date.now() - stoppedAt })),
  );
  const stop = (send: (pid: number) => void) => {
    stoppedAt = Date.now();
    send(npm.pid as number);
  };
  return { npm, output: () => output, stop, exited };
}

/** Every live process whose parent chain leads to root (read from /proc). */
function descendants(root: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z") parentOf.set(Number(entry), Number(fields[1]));
    } catch {
      // the process ended while we read
    }
  }
  const found: number[] = [];
  const frontier = [root];
  while (frontier.length > 0) {
    const parent = frontier.pop() as number;
    for (const [pid, ppid] of parentOf) {
      if (ppid === parent && !found.includes(pid)) {
        found.push(pid);
        frontier.push(pid);
      }
    }
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "?";
  }
}

async function startAndWaitHealthy(
  env: Record<string, string> = {},
): Promise<{ started: Started; pids: number[]; port: number }> {
  const port = await freePort();
  const started = npmStart({ PORT: String(port), HOST: "127.0.0.1", ...env });
  const healthy = waitFor(
    "npm start to answer /api/health",
    async () => (await fetch(`http://127.0.0.1:${port}/api/health`)).status === 200,
    60_000,
  );
  const endedEarly = started.exited.then(({ code }) =>
    Promise.reject(new Error(`npm start exited with ${code}`)),
  );
  await Promise.race([healthy, endedEarly]).catch((error) => {
    started.npm.kill("SIGKILL");
    throw new Error(`${error}\n--- output ---\n${started.output()}`);
  });
  const pids = descendants(started.npm.pid as number);
  return { started, pids, port };
}

async function expectCleanStop(started: Started, pids: number[]): Promise<void> {
  const { code, afterMs } = await started.exited;
  const leftover = pids.filter(alive);
  expect(leftover.map(commandOf), started.output()).toEqual([]);
  expect(code, started.output()).toBe(0);
  expect(afterMs).toBeLessThan(10_000);
  // A clean stop logs no error: no ioredis "Unhandled error event", no error or fatal log line.
  expect(started.output()).not.toMatch(/Unhandled error event|"level":(50|60)/);
}

describe("npm start stops cleanly", () => {
  it("stops API, workers, embedded PostgreSQL and redis-server on SIGTERM to npm, exit 0", async () => {
    const { started, pids, port } = await startAndWaitHealthy();
    const names = pids.map(commandOf).join("\n");
    expect(names).toMatch(/postgres/);
    expect(names).toMatch(/redis-server/);
    // The service reaches its PostgreSQL over the server's Unix socket (docs/operations.md "npm start").
    expect(started.output()).toMatch(/embedded PostgreSQL on 127\.0\.0\.1:\d+ and its socket in /);
    // On this install (embedded PostgreSQL, a fresh database in CI) every discovery document answers,
    // validates and links only to URLs that resolve (docs/discovery.md "The self-check").
    const check = await fetch(`http://127.0.0.1:${port}/api/discovery/check`);
    const report = (await check.json()) as {
      ok: boolean;
      documents: { ok: boolean }[];
      links: { ok: boolean }[];
    };
    expect(
      [...report.documents, ...report.links].filter((d) => !d.ok),
      started.output(),
    ).toEqual([]);
    expect(report.ok).toBe(true);
    started.stop((pid) => process.kill(pid, "SIGTERM"));
    await expectCleanStop(started, pids);
  }, 90_000);

  it("stops everything, the dev chain included, on Ctrl-C (SIGINT to the whole foreground group)", async () => {
    const { started, pids } = await startAndWaitHealthy({
      DEV_CHAIN: "1",
      DEV_CHAIN_PORT: String(await freePort()),
    });
    // A terminal's Ctrl-C signals every process of the foreground group at once.
    started.stop((pid) => process.kill(-pid, "SIGINT"));
    await expectCleanStop(started, pids);
  }, 90_000);
});

describe("npm start refuses a port in use", () => {
  let holder: Server | undefined;
  afterAll(() => holder?.close());

  it("exits non-zero with one line naming the port and its variable, leaving no child behind", async () => {
    const held = await freePort();
    holder = createServer();
    await new Promise<void>((resolve) => holder?.listen(held, "127.0.0.1", resolve));
    const started = npmStart({
      PORT: String(await freePort()),
      HOST: "127.0.0.1",
      DEV_CHAIN: "1",
      DEV_CHAIN_PORT: String(held),
    });
    const seen = new Set<number>();
    const watcher = setInterval(() => {
      for (const pid of descendants(started.npm.pid as number)) seen.add(pid);
    }, 20);
    const { code } = await started.exited;
    clearInterval(watcher);
    expect(code).not.toBe(0);
    const lines = started.output().trim().split("\n");
    expect(lines).toContain(
      `DEV_CHAIN_PORT: port ${held} is already in use on 127.0.0.1; stop what holds it or set DEV_CHAIN_PORT to a free port`,
    );
    expect(lines.filter((line) => line.includes("already in use"))).toHaveLength(1);
    expect([...seen].filter(alive).map(commandOf)).toEqual([]);
  }, 60_000);
});
