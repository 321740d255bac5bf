// `npm start`: the API and every worker in one process on a single machine. Uses DATABASE_URL and
// REDIS_URL when set; otherwise starts an embedded PostgreSQL and a local redis-server, and migrates.
import { getConfig, loadConfigOrExit, overrideConfig } from "../shared/config.js";
import { db } from "../shared/db/knex.js";
import { migrateLatest } from "../shared/db/migrate.js";
import { RedisNotInstalled, startEmbeddedPostgres, startLocalRedis } from "../shared/infra/embedded.js";
import { handleSignals, onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { QUEUE_NAMES } from "../shared/queue-names.js";
import { startWorkers } from "../workers/start.js";
import { startWeb } from "./server.js";

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const say = (message: string) => logger().info(message);
  handleSignals();
  if (!config.redisUrl) {
    const redis = await startLocalRedis(say);
    onShutdown("embedded redis", "embedded", redis.stop);
    overrideConfig({ redisUrl: redis.url });
  }
  if (!config.databaseUrl) {
    const postgres = await startEmbeddedPostgres(config.embeddedDataDir, say);
    onShutdown("embedded postgres", "embedded", postgres.stop);
    overrideConfig({ databaseUrl: postgres.url });
  }
  const applied = await migrateLatest(db());
  if (applied.length > 0) say(`applied ${applied.length} migrations`);
  await startWorkers(QUEUE_NAMES);
  await startWeb();
  say(`Agent Market is up: ${getConfig().publicBaseUrl} (try GET /api/health)`);
}

main().catch((err) => {
  if (err instanceof RedisNotInstalled) {
    console.error(err.message);
  } else {
    logger().fatal({ err }, "could not start");
  }
  process.exit(1);
});
