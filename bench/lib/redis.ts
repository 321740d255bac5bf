import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { loud } from "./output.js";
import { type Service, sleep } from "./service.js";

// The bench's view of the service's Redis: the executions queue (workers, draining) and the circuit
// breakers' state, under the bench's own QUEUE_PREFIX.

const EXECUTIONS_QUEUE = "executions";
const DRAIN_TIMEOUT_MS = 15_000;

/** The executions queue as the bench sees it, for readiness and draining. */
async function withQueue<T>(env: Record<string, string>, use: (queue: Queue) => Promise<T>): Promise<T> {
  const connection = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: null, lazyConnect: true });
  const queue = new Queue(EXECUTIONS_QUEUE, { connection, prefix: env.QUEUE_PREFIX });
  try {
    return await use(queue);
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

/** Resolves once `count` executions workers hold the queue (BullMQ names their Redis connections). */
export function waitForWorkers(
  env: Record<string, string>,
  count: number,
  children: readonly Service[],
  timeoutMs: number,
): Promise<void> {
  return withQueue(env, async (queue) => {
    const deadline = Date.now() + timeoutMs;
    let seen = 0;
    while (Date.now() < deadline) {
      const dead = children.find((c) => c.hasExited());
      if (dead) throw new Error(`an executions worker exited while starting:\n${dead.lines().join("\n")}`);
      seen = await queue.getWorkersCount();
      if (seen >= count) return;
      await sleep(200);
    }
    throw new Error(`${seen} of ${count} executions workers ready after ${timeoutMs / 1000} s`);
  });
}

/**
 * Waits (bounded) until the jobs of requests the load generator abandoned at the end have run, so that
 * stopping the processes fails none of them: a failed echo call would count against the echo listing's
 * circuit and open it for the next step.
 */
export function drainExecutions(env: Record<string, string>): Promise<void> {
  return withQueue(env, async (queue) => {
    const deadline = Date.now() + DRAIN_TIMEOUT_MS;
    while (Date.now() < deadline) {
      const counts = await queue.getJobCounts("waiting", "active", "delayed", "prioritized");
      if (Object.values(counts).every((n) => n === 0)) return;
      await sleep(100);
    }
    loud(`the executions queue was not empty ${DRAIN_TIMEOUT_MS / 1000} s after the load stopped`);
  });
}

/**
 * Forgets every circuit breaker's state under the bench's prefix. The previous run's shutdown can fail
 * the echo calls still in flight (the load generator abandons its last requests), and a circuit opened
 * then would refuse this run's first execute: an artefact of the last run, not something to measure.
 */
export async function resetCircuits(env: Record<string, string>): Promise<number> {
  if (!env.REDIS_URL || !env.QUEUE_PREFIX) return 0;
  const redis = new Redis(env.REDIS_URL, { lazyConnect: true });
  try {
    let removed = 0;
    const pattern = `${env.QUEUE_PREFIX.replace(/[*?[\]\\]/g, "\\$&")}:circuit:*`;
    for await (const keys of redis.scanStream({ match: pattern, count: 500 }) as AsyncIterable<string[]>)
      if (keys.length > 0) removed += await redis.del(...keys);
    return removed;
  } finally {
    redis.disconnect();
  }
}
