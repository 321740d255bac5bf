import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERRORS } from "../../shared/errors.js";
import { QUEUE_NAMES } from "../../shared/queue-names.js";
import { buildAgent } from "../helpers/factories.js";
import { type ApiResponse, api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => service.stop());

function expectEnvelope(res: ApiResponse, code: keyof typeof ERRORS): void {
  expect(res.status).toBe(ERRORS[code].status);
  expect(res.body).toEqual({
    success: false,
    error: {
      code,
      message: expect.any(String),
      retryable: ERRORS[code].retryable,
      buyer_action: ERRORS[code].buyerAction,
      fallback: ERRORS[code].fallback,
      request_id: res.headers.get("x-request-id"),
      ...(res.body?.error?.details ? { details: expect.any(Object) } : {}),
    },
  });
}

describe("GET /api/health", () => {
  it("is ok with PostgreSQL, Redis and every queue checked", async () => {
    const res = await api("GET", "/api/health");
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("ok");
    expect(res.body.failed).toEqual([]);
    expect(res.body.checks.postgres.ok).toBe(true);
    expect(res.body.checks.redis.ok).toBe(true);
    expect(Object.keys(res.body.checks.queues).sort()).toEqual([...QUEUE_NAMES].sort());
    for (const queue of QUEUE_NAMES) expect(res.body.checks.queues[queue].ok, queue).toBe(true);
    expect(res.body.checks.queues.executions.workers).toBeGreaterThanOrEqual(1);
    expect(new Date(res.body.checked_at).toISOString()).toBe(res.body.checked_at);
  });
});

describe("GET /api/stats", () => {
  const COUNTS = [
    "agents",
    "listings_active",
    "invocations_total",
    "invocations_succeeded",
    "invocations_failed",
    "invocations_in_progress",
    "invocations_awaiting_approval",
    "receipts",
  ];

  it("answers integer counts", async () => {
    const res = await api("GET", "/api/stats");
    expect(res.status).toBe(200);
    for (const name of COUNTS) {
      expect(Number.isInteger(res.body[name]), name).toBe(true);
      expect(res.body[name], name).toBeGreaterThanOrEqual(0);
    }
    // The seeded echo listing is always active.
    expect(res.body.listings_active).toBeGreaterThanOrEqual(1);
    expect(new Date(res.body.generated_at).toISOString()).toBe(res.body.generated_at);
  });

  it("counts a new agent, its invocation and its receipt", async () => {
    // Other files write to the same database in parallel: counts only ever grow by at least ours.
    const before = (await api("GET", "/api/stats")).body;
    const buyer = await buildAgent();
    const run = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "echo", input: { message: "stats" } },
    });
    expect(run.status).toBe(200);
    const after = (await api("GET", "/api/stats")).body;
    expect(after.agents).toBeGreaterThanOrEqual(before.agents + 1);
    expect(after.invocations_total).toBeGreaterThanOrEqual(before.invocations_total + 1);
    expect(after.invocations_succeeded).toBeGreaterThanOrEqual(before.invocations_succeeded + 1);
    expect(after.receipts).toBeGreaterThanOrEqual(before.receipts + 1);
  });
});

describe("unknown routes and methods", () => {
  it("an unknown path → 404 NOT_FOUND envelope", async () => {
    const res = await api("GET", "/api/no-such-route");
    expectEnvelope(res, "NOT_FOUND");
  });

  it("an unknown path with a key-looking header is still 404, not 401", async () => {
    const res = await api("GET", "/api/no-such-route", { headers: { authorization: "Bearer nonsense" } });
    expectEnvelope(res, "NOT_FOUND");
  });

  it("PUT /api/execute → 405 METHOD_NOT_ALLOWED envelope", async () => {
    const res = await api("PUT", "/api/execute");
    expectEnvelope(res, "METHOD_NOT_ALLOWED");
  });

  it("GET /api/execute → 405 METHOD_NOT_ALLOWED envelope", async () => {
    const res = await api("GET", "/api/execute");
    expectEnvelope(res, "METHOD_NOT_ALLOWED");
  });

  it("a 405 names the allowed methods in Allow (RFC 9110 §15.5.6)", async () => {
    const res = await api("PUT", "/api/execute");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow"), "405 without an Allow header").toEqual(expect.stringContaining("POST"));
  });
});
