import { randomBytes } from "node:crypto";
import { freePort } from "../../shared/infra/free-port.js";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "./test-env.js";

// Runs before each test file, in its own process, before any module reads the config. Each file gets
// its own port and its own BullMQ prefix, so files run in parallel without sharing queues.
const port = await freePort();
Object.assign(process.env, {
  PORT: String(port),
  HOST: "127.0.0.1",
  DATABASE_URL: TEST_DATABASE_URL,
  REDIS_URL: TEST_REDIS_URL,
  QUEUE_PREFIX: `{amtest-${randomBytes(4).toString("hex")}}`,
  LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
  VALIDATE_RESPONSES: "true",
  EXECUTE_SYNC_WAIT_MS: "5000",
  OUTBOX_SWEEP_INTERVAL_MS: "200",
  OUTBOX_STALE_AFTER_MS: "500",
  OUTBOUND_ALLOWLIST: "127.0.0.1,localhost",
  SHUTDOWN_GRACE_MS: "5000",
  // No probe-sweep scheduler unless a test asks: sweeps would probe every other file's sellers.
  HEALTH_PROBE_INTERVAL_MS: "0",
  // Every test file registers many agents from 127.0.0.1; test/api/client-limits.test.ts sets its own.
  KEYLESS_REQUESTS_PER_MINUTE: "100000",
  // Likewise no payout-sweep scheduler: a sweep would pay out every other file's sellers.
  PAYOUT_SWEEP_INTERVAL_MS: "0",
  // Nor the executions recovery sweep: other files' open invocations have their jobs under other prefixes.
  EXECUTIONS_RECOVERY_INTERVAL_MS: "0",
  SETTLEMENT_RECOVERY_INTERVAL_MS: "0",
  // Ranking reads call statistics fresh, so a test sees the calls it just made; the cache has its own test.
  RANKING_STATS_TTL_MS: "0",
});
