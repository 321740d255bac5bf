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
    postgres = `BENCH_DATABASE_URL${unixSocketNote(env.BENCH_DATABASE_URL)}`;
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

/**
 * ", over its Unix socket in <dir>" for a PostgreSQL URL that names one (?host=/dir), else nothing: the
 * transport changes what a round trip costs (docs/benchmarks.md "The thirty-first round"), so the
 * bench's header says which one a run used.
 */
export function unixSocketNote(url: string): string {
  const host = new URL(url).searchParams.get("host");
  return host?.startsWith("/") ? `, over its Unix socket in ${host}` : "";
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
    label: given
      ? `BENCH_DATABASE_URL (${parsed.host}${unixSocketNote(given)})`
      : `${LOCAL_PG.host}:${LOCAL_PG.port}`,
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
  await withPgClient(databaseUrl, (c) => c.query("vacuum (analyze)"));
}

/** Autovacuum's default thresholds: a table is analysed, or vacuumed, past 50 rows plus this share. */
const AUTOVACUUM = { baseRows: 50, analyzeShare: 0.1, vacuumShare: 0.2 } as const;

/**
 * Autovacuum's work, done by the bench on a server that runs without it (ours sets `autovacuum = off`
 * for CI), so that a run measures what a deployment sees. Without it, the plans a pooled connection keeps
 * are made on statistics taken while the tables were small, and never made again: a bench database
 * analysed while nearly empty, then grown by its warm-up, ran its c=32 executes at half speed with
 * PostgreSQL reading tables whole (docs/benchmarks.md "Soak").
 */
export class AutovacuumStandIn {
  private constructor(
    private readonly databaseUrl: string,
    private readonly log: (line: string) => void,
  ) {}

  /** A stand-in for the database's server, or undefined when that server runs autovacuum itself. */
  static async when(
    databaseUrl: string,
    log: (line: string) => void,
  ): Promise<AutovacuumStandIn | undefined> {
    const { rows } = await withPgClient(databaseUrl, (c) =>
      c.query("select current_setting('autovacuum') as on"),
    );
    if (rows[0]?.on === "on") return undefined;
    log("autovacuum is off on this server: the bench analyses and vacuums past autovacuum's thresholds");
    return new AutovacuumStandIn(databaseUrl, log);
  }

  /**
   * Analyses each table whose rows changed by more than autovacuum's threshold since its last analysis,
   * and vacuums each whose dead rows passed its vacuum threshold: what autovacuum would have done by now.
   */
  async catchUp(): Promise<void> {
    await withPgClient(this.databaseUrl, async (client) => {
      const { rows: tables } = await client.query(
        `select s.relname as name, s.n_mod_since_analyze::float8 as changed, s.n_dead_tup::float8 as dead,
                greatest(c.reltuples, 0)::float8 as rows
           from pg_stat_user_tables s join pg_class c on c.oid = s.relid`,
      );
      const due = (count: number, rows: number, share: number) => count > AUTOVACUUM.baseRows + share * rows;
      const work = tables.flatMap((t) => {
        const vacuum = due(t.dead, t.rows, AUTOVACUUM.vacuumShare);
        const analyze = due(t.changed, t.rows, AUTOVACUUM.analyzeShare);
        if (!vacuum && !analyze) return [];
        const name = `"${String(t.name).replaceAll('"', '""')}"`;
        return [vacuum ? `vacuum (analyze) ${name}` : `analyze ${name}`];
      });
      if (work.length === 0) return;
      const started = performance.now();
      for (const statement of work) await client.query(statement);
      this.log(
        `  (${work.length} tables analysed or vacuumed in ${((performance.now() - started) / 1000).toFixed(1)} s)`,
      );
    });
  }

  /** catchUp every `everyMs` (autovacuum's own nap is a minute); the stop waits for one under way. */
  every(everyMs: number): () => Promise<void> {
    let running = Promise.resolve();
    const timer = setInterval(() => {
      running = running.then(() => this.catchUp().catch((err) => this.log(`  autovacuum stand-in: ${err}`)));
    }, everyMs);
    return async () => {
      clearInterval(timer);
      await running;
    };
  }
}

/**
 * Runs `work` on a connection of its own, closed afterwards: what the benches' setup, maintenance and
 * counters use (maintenance statements such as VACUUM run outside any transaction, so not on a pool).
 */
export async function withPgClient<T>(
  connectionString: string,
  work: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5000 });
  client.on("error", () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
