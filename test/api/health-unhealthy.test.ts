import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERRORS } from "../../shared/errors.js";
import { checkHealth } from "../../shared/system/health.js";
import { api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// No executions worker on this file's queue prefix: the live executions queue has no consumer.
let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => service.stop());

describe("GET /api/health without an executions worker", () => {
  it("→ 503 SERVICE_UNAVAILABLE naming queue:executions", async () => {
    const res = await api("GET", "/api/health");
    expect(res.status).toBe(503);
    expect(res.body.success).toBe(false);
    expect(res.body.error).toMatchObject({
      code: "SERVICE_UNAVAILABLE",
      retryable: true,
      buyer_action: ERRORS.SERVICE_UNAVAILABLE.buyerAction,
      fallback: ERRORS.SERVICE_UNAVAILABLE.fallback,
      request_id: res.headers.get("x-request-id"),
    });
    expect(res.body.error.message).toContain("queue:executions");
    expect(res.headers.get("retry-after")).toBe(String(ERRORS.SERVICE_UNAVAILABLE.retryAfterSeconds));
    expect(res.body.error.details.failed).toEqual(["queue:executions"]);
    expect(res.body.error.details.checks.postgres.ok).toBe(true);
    expect(res.body.error.details.checks.redis.ok).toBe(true);
    expect(res.body.error.details.checks.queues.executions).toMatchObject({ ok: false, workers: 0 });
  });

  it("queues with no live work do not fail health for lack of a worker", async () => {
    const health = await checkHealth();
    expect(health.status).toBe("unhealthy");
    for (const queue of ["verification-probes", "monitoring-runs", "health-probes", "payouts"] as const)
      expect(health.checks.queues[queue].ok, queue).toBe(true);
    expect(health.failed).not.toContain("queue:payouts");
  });
});
