// The `web` process of the Procfile: the API and the outbox sweeper, nothing else.
import { loadConfigOrExit } from "../shared/config.js";
import { exitOnEvictingRedis } from "../shared/infra/redis-policy.js";
import { handleSignals, onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { startTracing, stopTracing } from "../shared/observability/tracing.js";
import { startWeb } from "./server.js";

const config = loadConfigOrExit();
if (!config.databaseUrl || !config.redisUrl) {
  console.error(
    "the web process needs DATABASE_URL and REDIS_URL (npm start embeds both for a single machine)",
  );
  process.exit(1);
}
// BullMQ loses jobs on a Redis that evicts keys: refuse one, with one line (docs/operations.md "Redis").
await exitOnEvictingRedis(config.redisUrl, {
  enabled: config.redisEvictionCheck,
  cluster: config.redisCluster,
});
handleSignals();
// OpenTelemetry, when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md "Traces").
if (await startTracing("agentmarket-web")) onShutdown("tracing", "clients", stopTracing);
startWeb().catch((err) => {
  logger().fatal({ err }, "api failed to start");
  process.exit(1);
});
