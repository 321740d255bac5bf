import { createHash } from "node:crypto";
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from "ioredis";
import { getConfig } from "./config.js";
import { isStopping } from "./lifecycle.js";
import { logger } from "./log.js";

/**
 * A connection to the service's Redis: one server, or with REDIS_CLUSTER a Redis Cluster. BullMQ takes
 * either as its connection. On a cluster every key of the service shares one slot, because each starts
 * with QUEUE_PREFIX and config refuses a prefix without a hash tag; so multi-key scripts, MULTI and
 * pipelines work unchanged (docs/operations.md "Redis Cluster").
 */
export type RedisClient = Redis | Cluster;

function redisUrl(): string {
  const { redisUrl } = getConfig();
  if (!redisUrl)
    throw new Error("REDIS_URL is not set (npm start runs a local redis-server; processes need it)");
  return redisUrl;
}

/**
 * A Cluster client seeded by one node's URL: ioredis asks that node for the slot map and connects to
 * the others itself. The URL's user, password and TLS (rediss:) apply to every node.
 */
export function clusterClient(url: string, nodeOptions: RedisOptions, options: ClusterOptions = {}): Cluster {
  const seed = new URL(url);
  return new Cluster([{ host: seed.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(seed.port || 6379) }], {
    ...options,
    redisOptions: {
      ...nodeOptions,
      ...(seed.username ? { username: decodeURIComponent(seed.username) } : {}),
      ...(seed.password ? { password: decodeURIComponent(seed.password) } : {}),
      ...(seed.protocol === "rediss:" ? { tls: {} } : {}),
    },
  });
}

function connect(role: string, nodeOptions: RedisOptions, options: ClusterOptions = {}): RedisClient {
  const client = getConfig().redisCluster
    ? clusterClient(redisUrl(), nodeOptions, options)
    : new Redis(redisUrl(), nodeOptions);
  return withErrorLog(client, role);
}

/**
 * Workers block on Redis and must retry forever (BullMQ requires maxRetriesPerRequest: null); producers
 * fail fast (no offline queue) so an API request never hangs on a Redis outage: the outbox covers it.
 * On a cluster the producer's no-offline-queue is the cluster's (a command fails while the cluster is
 * not ready); its node connections keep theirs, which ioredis needs to send to a node still connecting.
 */
export function createRedis(role: "worker" | "producer"): RedisClient {
  if (role === "worker") return connect(role, { maxRetriesPerRequest: null });
  const failFast = { maxRetriesPerRequest: 1, connectTimeout: 2000, ...AUTO_PIPELINING };
  return getConfig().redisCluster
    ? connect(role, failFast, { enableOfflineQueue: false, ...AUTO_PIPELINING })
    : connect(role, { ...failFast, enableOfflineQueue: false });
}

/**
 * Commands issued in the same event-loop turn leave in one write (ioredis auto-pipelining): under load
 * the enqueues of many concurrent requests share a socket write and a Redis read, where each write is a
 * system call that costs more than the command. Producers only. Not for worker connections: BullMQ
 * blocks on those (BZPOPMIN), and a command queued behind a blocking one would wait. Not for the command
 * connection either: every pipelined command goes through an ioredis Pipeline object, and under load V8
 * promotes those to the old generation; the execute path's few scripts gained no throughput from it
 * (docs/benchmarks.md, "Garbage").
 */
const AUTO_PIPELINING = { enableAutoPipelining: true } as const;

/**
 * ioredis prints "Unhandled error event" for a client without an error listener, once per reconnect
 * attempt. Every client gets one: a lost connection is logged once as a warning while running (the
 * client reconnects by itself) and not at all during a shutdown, when Redis going away is expected.
 */
function withErrorLog(client: RedisClient, role: string): RedisClient {
  let reported = false;
  client.on("error", (err: Error) => {
    if (isStopping() || reported) return;
    reported = true;
    logger().warn({ role, err: err.message }, "redis connection lost; reconnecting");
  });
  client.on("ready", () => {
    reported = false;
  });
  return client;
}

/**
 * A connection to one Redis server at `url` (not a cluster), with the service's error log: for what
 * needs one server's ordering, such as the invalidation channel's subscriber and its pings.
 */
export function serverClient(url: string, role: string, options: RedisOptions): Redis {
  return withErrorLog(new Redis(url, options), role) as Redis;
}

let commands: RedisClient | undefined;

/** One connection per process for plain commands (limits, circuit state); it queues while reconnecting. */
export function commandRedis(): RedisClient {
  if (!commands) commands = connect("commands", { maxRetriesPerRequest: 2 });
  return commands;
}

export async function closeCommandRedis(): Promise<void> {
  const current = commands;
  commands = undefined;
  current?.disconnect();
}

/** What a Lua script needs of a client: a plain connection or, where one is configured, a cluster. */
interface ScriptRunner {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/**
 * A Lua script run by its SHA1 (EVALSHA), loaded with EVAL only when Redis does not know it yet
 * (NOSCRIPT: first use, or after a Redis restart). EVAL sends the whole text on every call and makes
 * Redis hash it again; the hot path runs these on every execute.
 */
export function luaScript(source: string) {
  const sha = createHash("sha1").update(source).digest("hex");
  return async (redis: ScriptRunner, keys: readonly string[], args: readonly (string | number)[]) => {
    try {
      return await redis.evalsha(sha, keys.length, ...keys, ...args);
    } catch (error) {
      if (!(error as Error).message?.startsWith("NOSCRIPT")) throw error;
      return redis.eval(source, keys.length, ...keys, ...args);
    }
  };
}

/**
 * The servers a SCAN must visit to see every key: the one server, or each master of a cluster (SCAN
 * walks one node's keys only, and ioredis would send it to any node).
 */
export function scanTargets(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes("master") : [client];
}
