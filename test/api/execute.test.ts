import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { json, startGatedSeller, startSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let buyer: TestAgent;

beforeAll(async () => {
  service = await startService();
  buyer = await buildAgent();
});
afterAll(async () => service.stop());

describe("POST /api/execute (echo)", () => {
  it("routes echo through the queue to the provider and returns output, receipt and status links", async () => {
    const res = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "echo", input: { message: "hi" } },
    });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.output.echo).toEqual({ message: "hi" });
    expect(res.body.output.server.platform).toBe("agentmarket");
    expect(res.body.output.headers_received["idempotency-key"]).toBe(res.body.invocation_id);
    expect(res.body.cost).toEqual({
      amount_usdc: "0.000000",
      listed_price_usdc: "0.000000",
      currency: "USDC",
      charged: false,
    });

    const status = await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key: buyer.apiKey });
    expect(status.status).toBe(200);
    expect(status.body.status).toBe("succeeded");
    expect(status.body.attempts).toHaveLength(1);
    expect(status.body.attempts[0].status).toBe("succeeded");
    expect(status.body.receipt_id).toBe(res.body.receipt_id);
    expect(status.body.settlement).toEqual({ state: null, null_reason: "free_listing_no_settlement" });

    const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, { key: buyer.apiKey });
    expect(receipt.status).toBe(200);
    expect(receipt.body.invocation_id).toBe(res.body.invocation_id);
    expect(receipt.body.amount_usdc).toBe("0.000000");
    expect(receipt.body.provider_evidence.http_status).toBe(200);
    expect(receipt.body.provider_evidence.response_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("answers 202 with the status URL when the result takes longer than the sync budget", async () => {
    const seller = await startGatedSeller();
    const release = seller.release;
    try {
      const listing = await buildListing({ endpointUrl: seller.url });
      overrideConfig({ executeSyncWaitMs: 100 });
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {} },
      });
      overrideConfig({ executeSyncWaitMs: 5000 });
      expect(res.status).toBe(202);
      expect(["queued", "running"]).toContain(res.body.status);
      expect(res.body.status_url).toContain(`/api/execute/status/${res.body.invocation_id}`);
      release();
      await expect
        .poll(
          async () =>
            (await api("GET", `/api/execute/status/${res.body.invocation_id}`, { key: buyer.apiKey })).body
              .status,
        )
        .toBe("succeeded");
    } finally {
      release();
      await seller.close();
    }
  });
});

describe("POST /api/execute bad input", () => {
  it.each([
    ["missing task", { input: {} }, "/task"],
    ["missing input", { task: "echo" }, "/input"],
    ["input not an object", { task: "echo", input: "x" }, "/input"],
    ["unknown property", { task: "echo", input: {}, extra: 1 }, "/extra"],
    [
      "negative max_cost",
      { task: "echo", input: {}, constraints: { max_cost: -1 } },
      "/constraints/max_cost",
    ],
    ["echo message too long", { task: "echo", input: { message: "x".repeat(4001) } }, "/input/message"],
  ])("%s → 400 SCHEMA_VALIDATION_FAILED naming %s", async (_name, body, path) => {
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(path);
  });

  it("malformed JSON → 400, not 500", async () => {
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, raw: '{"task": "echo",' });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.request_id).toBe(res.headers.get("x-request-id"));
  });

  it("an unknown task → 404 LISTING_NOT_FOUND with the match fallback", async () => {
    const res = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "no-such-task-anywhere", input: {} },
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({
      code: "LISTING_NOT_FOUND",
      retryable: false,
      fallback: "call_execute_match",
    });
  });

  it("a paid listing is refused with 503 temporarily_unavailable before any provider call", async () => {
    const seller = await startSeller((_c, res) => json(res, 200, { ok: true }));
    try {
      const listing = await buildListing({ endpointUrl: seller.url, price: 0.05 });
      const before = await db()("invocations").where({ listing_id: listing.id }).count({ n: "*" });
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {} },
      });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe("TEMPORARILY_UNAVAILABLE");
      expect(res.body.error.details.reason).toBe("platform_custody_frozen");
      expect(seller.calls).toHaveLength(0);
      const after = await db()("invocations").where({ listing_id: listing.id }).count({ n: "*" });
      expect(after).toEqual(before);
    } finally {
      await seller.close();
    }
  });

  it("max_cost below every candidate's price → 404 LISTING_NOT_FOUND", async () => {
    const seller = await startSeller((_c, res) => json(res, 200, {}));
    try {
      const listing = await buildListing({ endpointUrl: seller.url, price: 0.5 });
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {}, constraints: { max_cost: 0.1 } },
      });
      expect(res.status).toBe(404);
      expect(errorCode(res)).toBe("LISTING_NOT_FOUND");
    } finally {
      await seller.close();
    }
  });
});

describe("status and receipts belong to their agent", () => {
  it("another agent reads 404 for both; unknown and malformed ids are 404", async () => {
    const res = await api("POST", "/api/execute", { key: buyer.apiKey, body: { task: "echo", input: {} } });
    const other = await buildAgent();
    for (const path of [
      `/api/execute/status/${res.body.invocation_id}`,
      `/api/commerce/receipts/${res.body.receipt_id}`,
    ]) {
      const read = await api("GET", path, { key: other.apiKey });
      expect(read.status).toBe(404);
      expect(errorCode(read)).toBe("NOT_FOUND");
    }
    for (const path of [
      "/api/execute/status/00000000-0000-4000-8000-000000000000",
      "/api/execute/status/not-a-uuid",
      "/api/commerce/receipts/00000000-0000-4000-8000-000000000000",
    ]) {
      expect((await api("GET", path, { key: buyer.apiKey })).status).toBe(404);
    }
  });

  it("status and receipt need a key", async () => {
    const res = await api("GET", "/api/execute/status/00000000-0000-4000-8000-000000000000");
    expect(res.status).toBe(401);
    expect(errorCode(res)).toBe("UNAUTHORIZED");
  });
});
