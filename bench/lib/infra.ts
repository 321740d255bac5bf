import { Socket } from "node:net";
import pg from "pg";

// Choosing the infrastructure a benchmark runs on: the local PostgreSQL and Redis, or the ones named by BENCH_* variables.

const LOCAL_PG = { host: "127.0.0.1", port: 5432, user: "postgres" } as const;
const LOCAL_REDIS = { host: "127.0.0.1", port: 6379 } as const;
const BENCH_DATABASE = "agentmarket_bench";
const BENCH_QUEUE_PREFIX = "{ambench}";

export interface Infra {
  env: Record<string, string>;
  postgres: string;
  redis: string;
}

/** Connects as postgres to the local server and creates the bench database; false when none answers. */
export async function ensureLocalDatabase(database = BENCH_DATABASE): Promise<boolean> {
  const client = new pg.Client({ ...LOCAL_PG, database: "postgres", connectionTimeoutMillis: 2000 });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch {
    return false;
  }
  try {
    const found = await client.query("select 1 from pg_database where datname = $1", [database]);
    if (found.rowCount === 0) await client.query(`create database "${database}"`);
    return true;
  } finally {
    await client.end();
  }
}

/** A bare RESP PING, so that probing needs no client library and gives up fast. */
export function redisAnswers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
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
 * Where a benchmark's rows and jobs go on the machine's servers. A benchmark that may run while another
 * one does (they share the machine's PostgreSQL and Redis) takes its own database and queue prefix:
 * with a shared prefix, one bench's workers would take the other's jobs.
 */
export interface BenchPlace {
  /** The database created on the local PostgreSQL (BENCH_DATABASE_URL, when set, wins). */
  database: string;
  /** The BullMQ key prefix on a shared Redis. */
  queuePrefix: string;
}

const DEFAULT_PLACE: BenchPlace = { database: BENCH_DATABASE, queuePrefix: BENCH_QUEUE_PREFIX };

/**
 * BENCH_* URLs win; then a PostgreSQL / Redis on their default local ports; else nothing, and the
 * service starts its embedded ones (slower to start, but the bench still runs anywhere).
 */
export async function resolveInfra(
  env: NodeJS.ProcessEnv = process.env,
  place: BenchPlace = DEFAULT_PLACE,
): Promise<Infra> {
  const out: Record<string, string> = {};
  let postgres = "embedded (started by the service)";
  let redis = "local redis-server child (started by the service)";
  if (env.BENCH_DATABASE_URL) {
    out.DATABASE_URL = env.BENCH_DATABASE_URL;
    postgres = "BENCH_DATABASE_URL";
  } else if (await ensureLocalDatabase(place.database)) {
    out.DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${place.database}`;
    postgres = `127.0.0.1:5432/${place.database}`;
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
    out.QUEUE_PREFIX = place.queuePrefix;
    redis += `, QUEUE_PREFIX=${place.queuePrefix}`;
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

export async function postgresAnswers(url: string): Promise<boolean> {
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

/**
 * What autovacuum does for a deployment, done for the bench database before it is measured: dead rows
 * reclaimed and planner statistics fresh. The machine's PostgreSQL may run without autovacuum (ours sets
 * `autovacuum = off` for CI), and the bench database keeps every run's rows: each execute leaves dead
 * versions (the outbox row marked sent, the invocation and attempt brought to their outcome) that the
 * outbox sweeper's partial index then walks, and statistics taken before a table grew (docs/benchmarks.md
 * "The sixth round"). A bench runs this after its warm-up.
 */
export async function vacuumAnalyzeDatabase(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query("vacuum (analyze)");
  } finally {
    await client.end();
  }
}

/** Whether the server that holds `databaseUrl` runs autovacuum. */
export async function autovacuumIsOn(databaseUrl: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rows } = await client.query("select current_setting('autovacuum') as on");
    return rows[0].on === "on";
  } finally {
    await client.end();
  }
}

/**
 * For a bench that runs for minutes: when the server runs without autovacuum, `vacuumAnalyzeDatabase`
 * every `everyMs` (autovacuum's own nap is a minute), so the run measures what a deployment sees. Without
 * it a soak measures statistics that went stale as its tables grew 100×: each connection's cached plan of
 * the grouped success, made while the attempts table held a thousand rows, kept a sequential scan of it
 * (docs/benchmarks.md "Soak"). Returns a stop that waits for a vacuum under way; with autovacuum on it
 * does nothing.
 */
export async function standInForAutovacuum(
  databaseUrl: string,
  everyMs: number,
  log: (line: string) => void,
): Promise<() => Promise<void>> {
  if (await autovacuumIsOn(databaseUrl)) return async () => {};
  log(
    `autovacuum is off on this server: the bench runs vacuum (analyze) every ${everyMs / 1000} s in its place`,
  );
  let running = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(async () => {
      const started = performance.now();
      try {
        await vacuumAnalyzeDatabase(databaseUrl);
        log(`  vacuum (analyze) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      } catch (err) {
        log(`  vacuum (analyze) failed: ${(err as Error).message}`);
      }
    });
  }, everyMs);
  return async () => {
    clearInterval(timer);
    await running;
  };
}
