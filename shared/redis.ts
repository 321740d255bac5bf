import { Redis, type RedisOptions } from "ioredis";
import { getConfig } from "./config.js";

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
  return new Redis(redisUrl(), options);
}

let commands: Redis | undefined;

/** One connection per process for plain commands (limits, circuit state); it queues while reconnecting. */
export function commandRedis(): Redis {
  if (!commands) commands = new Redis(redisUrl(), { maxRetriesPerRequest: 2 });
  return commands;
}

export async function closeCommandRedis(): Promise<void> {
  const current = commands;
  commands = undefined;
  current?.disconnect();
}
