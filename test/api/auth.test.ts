import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { ERRORS } from "../../shared/errors.js";
import { generateApiKey, hashApiKey } from "../../shared/identity/api-keys.js";
import { findApiKeyByHash } from "../../shared/identity/store/api-keys.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { type ApiResponse, api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let agent: TestAgent;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
  agent = await buildAgent();
});
afterAll(async () => service.stop());

function expectUnauthorized(res: ApiResponse): void {
  expect(res.status).toBe(401);
  expect(res.body).toEqual({
    success: false,
    error: {
      code: "UNAUTHORIZED",
      message: expect.any(String),
      retryable: false, // the same request without a valid key never succeeds
      buyer_action: ERRORS.UNAUTHORIZED.buyerAction,
      fallback: ERRORS.UNAUTHORIZED.fallback,
      request_id: res.headers.get("x-request-id"),
    },
  });
}

function withBadChecksum(key: string): string {
  const last = key.at(-1) === "A" ? "B" : "A";
  return key.slice(0, -1) + last;
}

describe("GET /api/welcome/flower authentication", () => {
  it.each([
    ["no Authorization header", () => undefined],
    ["Bearer with nothing", () => "Bearer"],
    ["Bearer and a space", () => "Bearer "],
    ["Basic credentials", () => "Basic abc"],
    ["a bare key without Bearer", () => agent.apiKey],
    ["a malformed key", () => "Bearer amk_short"],
    ["a key of another shape", () => "Bearer sk_live_0123456789abcdef0123456789abcdef"],
    ["a well-formed key with a bad checksum", () => `Bearer ${withBadChecksum(agent.apiKey)}`],
    ["a well-formed unknown key", () => `Bearer ${generateApiKey()}`],
    ["two tokens", () => `Bearer ${agent.apiKey} ${agent.apiKey}`],
  ])("%s → 401 UNAUTHORIZED", async (_name, header) => {
    const value = header();
    const res = await api("GET", "/api/welcome/flower", {
      headers: value === undefined ? {} : { authorization: value },
    });
    expectUnauthorized(res);
  });

  it("a good key → 200 with the agent id", async () => {
    const res = await api("GET", "/api/welcome/flower", { key: agent.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.agent_id).toBe(agent.agentId);
    expect(res.body.item).toMatchObject({ id: "welcome-flower", price_usdc: "0.000000" });
  });

  it("accepts a lower-case bearer scheme", async () => {
    const res = await api("GET", "/api/welcome/flower", {
      headers: { authorization: `bearer ${agent.apiKey}` },
    });
    expect(res.status).toBe(200);
    expect(res.body.agent_id).toBe(agent.agentId);
  });

  it("a revoked key stops working on the next request", async () => {
    const victim = await buildAgent();
    expect((await api("GET", "/api/welcome/flower", { key: victim.apiKey })).status).toBe(200);
    // Through the API, as a revocation is made: the key's cache entry (this request made one) is told.
    await revokeItself(victim.apiKey);
    const res = await api("GET", "/api/welcome/flower", { key: victim.apiKey });
    expectUnauthorized(res);
    expect((await api("GET", "/api/welcome/flower", { key: agent.apiKey })).status).toBe(200);
  });
});

// POST /api/execute starts its task's listing read while the key is looked up (RouteDef.prefetch, in
// api/mount.ts): the answer and the order of refusals must be those of a route without it.
/** A key revokes itself (POST /api/keys/{id}/revoke), as any key may. */
async function revokeItself(apiKey: string): Promise<void> {
  const row = await findApiKeyByHash(db(), hashApiKey(apiKey));
  const res = await api("POST", `/api/keys/${row!.id}/revoke`, { key: apiKey, body: {} });
  expect(res.status).toBe(200);
}

describe("POST /api/execute with its listing read started alongside the key lookup", () => {
  it("still refuses an unknown or revoked key first, whatever the body", async () => {
    const unknown = generateApiKey();
    for (const body of [{ task: "echo", input: {} }, { task: 42 }, {}]) {
      expectUnauthorized(await api("POST", "/api/execute", { key: unknown, body }));
    }
    const other = await buildAgent();
    await revokeItself(other.apiKey);
    expectUnauthorized(
      await api("POST", "/api/execute", { key: other.apiKey, body: { task: "echo", input: {} } }),
    );
  });

  it("answers an invalid body with a valid key as 400, and an unknown task as 404", async () => {
    const invalid = await api("POST", "/api/execute", { key: agent.apiKey, body: { task: 42, input: {} } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.code).toBe("SCHEMA_VALIDATION_FAILED");
    const unknownTask = await api("POST", "/api/execute", {
      key: agent.apiKey,
      body: { task: `no-such-task-${Date.now()}`, input: {} },
    });
    expect(unknownTask.status).toBe(404);
    expect(unknownTask.body.error.code).toBe("LISTING_NOT_FOUND");
  });
});
