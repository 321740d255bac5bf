import { createHash } from "node:crypto";
import { Redis, type RedisOptions } from "ioredis";
import { getConfig } from "./config.js";
import { isStopping } from "./lifecycle.js";
import { logger } from "./log.js";

function redisUrl(): string {
  const { redisUrl } = getConfig();
  if (!redisUrl)
    throw new Error("REDIS_URL is not set (npm start runs a local redis-server; processes need it)");
  return redisUrl;
}

/**
 * Workers block on Redis and must retry forever (BullMQ requires maxRetriesPerRequest: null); producers
 * fail fast (no offline queue) so an API request never hangs on a Redis outage: the outbox covers it.
 */
export function createRedis(role: "worker" | "producer"): Redis {
  const options: RedisOptions =
    role === "worker"
      ? { maxRetriesPerRequest: null }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2000 };
  return withErrorLog(new Redis(redisUrl(), options), role);
}

/**
 * ioredis prints "Unhandled error event" for a client without an error listener, once per reconnect
 * attempt. Every client gets one: a lost connection is logged once as a warning while running (the
 * client reconnects by itself) and not at all during a shutdown, when Redis going away is expected.
 */
function withErrorLog(client: Redis, role: string): Redis {
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

let commands: Redis | undefined;

/** One connection per process for plain commands (limits, circuit state); it queues while reconnecting. */
export function commandRedis(): Redis {
  if (!commands) commands = withErrorLog(new Redis(redisUrl(), { maxRetriesPerRequest: 2 }), "commands");
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
