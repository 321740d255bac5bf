import { db } from "../db/knex.js";
import { QUEUE_NAMES, type QueueName } from "../queue-names.js";
import { getQueue, pingRedis } from "../queues.js";
import { pingDb, readMarketCounts } from "./store.js";

const CHECK_TIMEOUT_MS = 2000;

/** Queues whose work is live today; a live queue with no worker means its requests cannot finish. */
const LIVE_QUEUES: readonly QueueName[] = ["executions"];

async function timed<T>(check: () => Promise<T>) {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const value = await Promise.race([
      check(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return { ok: true as const, latency_ms: Math.round(performance.now() - started), value };
  } catch (error) {
    return {
      ok: false as const,
      latency_ms: Math.round(performance.now() - started),
      error: (error as Error).message,
    };
  } finally {
    clearTimeout(timer);
  }
}

async function queueHealth(name: QueueName) {
  const queue = getQueue(name);
  const result = await timed(async () => ({
    counts: await queue.getJobCounts("waiting", "active", "delayed", "failed"),
    workers: await queue.getWorkersCount(),
  }));
  const live = LIVE_QUEUES.includes(name);
  if (!result.ok) return { ok: false, live, error: result.error };
  const { counts, workers } = result.value;
  const ok = !live || workers > 0;
  return { ok, live, workers, ...counts, ...(ok ? {} : { error: "no worker is consuming this queue" }) };
}

/** Checks PostgreSQL, Redis and every queue; `failed` names each dependency that is not healthy. */
export async function checkHealth() {
  const [postgres, redis, ...queues] = await Promise.all([
    timed(() => pingDb(db())),
    timed(pingRedis),
    ...QUEUE_NAMES.map(queueHealth),
  ]);
  const queueChecks = Object.fromEntries(QUEUE_NAMES.map((name, i) => [name, queues[i]!])) as Record<
    QueueName,
    Awaited<ReturnType<typeof queueHealth>>
  >;
  const checks = {
    postgres: postgres.ok
      ? { ok: true, latency_ms: postgres.latency_ms }
      : { ok: false, error: postgres.error },
    redis: redis.ok ? { ok: true, latency_ms: redis.latency_ms } : { ok: false, error: redis.error },
    queues: queueChecks,
  };
  const failed = [
    ...(postgres.ok ? [] : ["postgres"]),
    ...(redis.ok ? [] : ["redis"]),
    ...QUEUE_NAMES.filter((name) => !queueChecks[name].ok).map((name) => `queue:${name}`),
  ];
  return {
    status: failed.length === 0 ? ("ok" as const) : ("unhealthy" as const),
    failed,
    checks,
    checked_at: new Date().toISOString(),
  };
}

/** The live marketplace numbers behind /api/stats. */
export async function marketStats() {
  return { ...(await readMarketCounts(db())), generated_at: new Date().toISOString() };
}
