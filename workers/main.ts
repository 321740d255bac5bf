// A worker process of the Procfile: `node dist/workers/main.js <queue>`, one queue per process so that
// operators scale each pool on its own.
import { loadConfigOrExit } from "../shared/config.js";
import { exitOnEvictingRedis } from "../shared/infra/redis-policy.js";
import { handleSignals, onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { startTracing, stopTracing } from "../shared/observability/tracing.js";
import { isQueueName, QUEUE_NAMES } from "../shared/queue-names.js";
import { startWorkers } from "./start.js";

const queue = process.argv[2] ?? "";
if (!isQueueName(queue)) {
  console.error(`usage: node dist/workers/main.js <queue>\nqueues: ${QUEUE_NAMES.join(", ")}`);
  process.exit(2);
}
const config = loadConfigOrExit();
if (!config.databaseUrl || !config.redisUrl) {
  console.error("worker processes need DATABASE_URL and REDIS_URL");
  process.exit(1);
}
// BullMQ loses jobs on a Redis that evicts keys: refuse one, with one line (docs/operations.md "Redis").
await exitOnEvictingRedis(config.redisUrl, {
  enabled: config.redisEvictionCheck,
  cluster: config.redisCluster,
});
handleSignals();
// OpenTelemetry, when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md "Traces").
if (await startTracing(`agentmarket-${queue}`)) onShutdown("tracing", "clients", stopTracing);
startWorkers([queue]).catch((err) => {
  logger().fatal({ err, queue }, "worker failed to start");
  process.exit(1);
});
