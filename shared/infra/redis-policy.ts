import { Redis } from "ioredis";
import { clusterClient } from "../redis.js";

// BullMQ keeps jobs, locks and schedules in Redis keys: a Redis that evicts keys under memory pressure
// silently loses jobs. So every process refuses, at start, a Redis whose maxmemory-policy is not
// `noeviction` (docs/operations.md "Redis"). Managed Redis often forbids CONFIG: then INFO memory's
// `maxmemory_policy` answers the same question. On a Redis Cluster every node is read.

/** The server's maxmemory-policy, from CONFIG GET or, where CONFIG is forbidden, INFO memory. */
export async function readEvictionPolicy(redis: Redis): Promise<string | undefined> {
  try {
    const reply = (await redis.config("GET", "maxmemory-policy")) as string[];
    if (reply?.[1]) return reply[1];
  } catch {
    // CONFIG is disabled or renamed (managed Redis): fall back to INFO.
  }
  const info = await redis.info("memory");
  return /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
}

/** The one line a process prints before exiting 1, or undefined when the policy is noeviction. */
export async function evictionProblem(url: string, cluster = false): Promise<string | undefined> {
  if (cluster) return clusterEvictionProblem(url);
  const redis = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    connectTimeout: 5000,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  try {
    await redis.connect();
    const policy = await readEvictionPolicy(redis);
    if (policy === "noeviction") return undefined;
    return refusal(policy);
  } finally {
    redis.disconnect();
  }
}

function refusal(policy: string | undefined, node = ""): string {
  return `refusing to start: Redis maxmemory-policy is ${policy ?? "unknown"}${node}, BullMQ needs noeviction (set maxmemory-policy noeviction; docs/operations.md "Redis"; REDIS_EVICTION_CHECK=false skips this check)`;
}

/**
 * On a Redis Cluster each node has its own maxmemory-policy: every node is read, replicas too, since a
 * replica becomes the master of the queues' slot at a failover.
 */
async function clusterEvictionProblem(url: string): Promise<string | undefined> {
  const cluster = clusterClient(
    url,
    { maxRetriesPerRequest: 1, connectTimeout: 5000, retryStrategy: () => null },
    { lazyConnect: true, clusterRetryStrategy: () => null },
  );
  cluster.on("error", () => {});
  try {
    await cluster.connect();
    for (const node of cluster.nodes("all")) {
      const policy = await readEvictionPolicy(node);
      if (policy !== "noeviction")
        return refusal(policy, ` on cluster node ${node.options.host}:${node.options.port}`);
    }
    return undefined;
  } finally {
    cluster.disconnect();
  }
}

/**
 * What the web and worker processes run first: with REDIS_EVICTION_CHECK on, an evicting or unreadable
 * Redis (any node of a cluster) stops the process with one line and exit 1, before anything starts.
 */
export async function exitOnEvictingRedis(
  url: string,
  options: { enabled: boolean; cluster: boolean },
): Promise<void> {
  if (!options.enabled) return;
  const problem = await evictionProblem(url, options.cluster).catch(
    (err: Error) => `cannot read Redis's eviction policy: ${err.message}`,
  );
  if (problem) {
    console.error(problem);
    process.exit(1);
  }
}
