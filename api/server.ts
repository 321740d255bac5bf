import type { Server } from "node:http";
import { getConfig } from "../shared/config.js";
import { closeDb } from "../shared/db/knex.js";
import { startInvalidationListener } from "../shared/invalidation.js";
import { onShutdown } from "../shared/lifecycle.js";
import { logger } from "../shared/log.js";
import { closeSafeFetch } from "../shared/net/safe-fetch.js";
import { flushJobMarks, startSweeper } from "../shared/outbox/index.js";
import { closeQueues } from "../shared/queues.js";
import { closeCommandRedis } from "../shared/redis.js";
import { startApprovalExpiry } from "../shared/routing/index.js";
import { HOUSEKEEPING } from "./housekeeping.js";
import { createHttpServer } from "./http-server.js";

/**
 * Starts the web process: the API, plus the outbox sweeper, the approval expiry sweep and the listener
 * that keeps its caches told of changes (shared/invalidation.ts). Shutdown stops
 * new connections and lets in-flight requests finish before queues and the database close
 * (shared/lifecycle.ts phases).
 */
export async function startWeb(): Promise<Server> {
  const config = getConfig();
  onShutdown("database", "database", closeDb);
  onShutdown("queues", "clients", closeQueues);
  onShutdown("command redis", "clients", closeCommandRedis);
  onShutdown("outbound http", "clients", closeSafeFetch);
  const sweeper = startSweeper(HOUSEKEEPING);
  onShutdown("sweeper", "background", () => sweeper.stop());
  const approvalExpiry = startApprovalExpiry();
  onShutdown("approval expiry", "background", () => approvalExpiry.stop());
  onShutdown("outbox marks", "background", flushJobMarks);
  // Before listening: a request answered from a cache must already be hearing about changes.
  await startInvalidationListener();

  const server = createHttpServer().listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  onShutdown("http server", "ingress", () => {
    server.closeIdleConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const address = server.address();
  logger().info({ address }, "api listening");
  return server;
}
