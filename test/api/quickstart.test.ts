import { createPrivateKey, createPublicKey, randomBytes, sign, verify } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { hashApiKey, isWellFormedApiKey } from "../../shared/identity/api-keys.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => service.stop());

function uniqueName(): string {
  return `qs-test-${randomBytes(4).toString("hex")}`;
}

describe("POST /api/quickstart", () => {
  it.each(["buyer", "seller", "both"] as const)(
    "registers a %s with a working key and a signing key pair",
    async (intent) => {
      const name = uniqueName();
      const res = await api("POST", "/api/quickstart", { body: { name, intent } });
      expect(res.status).toBe(201);
      const body = res.body;
      expect(body.agent_id).toMatch(UUID);
      expect(body.name).toBe(name);
      expect(body.intent).toBe(intent);
      expect(isWellFormedApiKey(body.api_key)).toBe(true);
      expect(body.wallet_setup).toEqual(expect.any(Object));
      expect(body.next_steps.length).toBeGreaterThan(0);
      expect(new Date(body.created_at).toISOString()).toBe(body.created_at);

      const privateKey = createPrivateKey({
        key: Buffer.from(body.signing_key, "base64url"),
        format: "der",
        type: "pkcs8",
      });
      expect(privateKey.asymmetricKeyType).toBe("ed25519");
      const publicHalf = createPublicKey(privateKey).export({ format: "der", type: "spki" });
      expect(publicHalf.toString("base64url")).toBe(body.signing_public_key);
      const published = createPublicKey({
        key: Buffer.from(body.signing_public_key, "base64url"),
        format: "der",
        type: "spki",
      });
      const message = Buffer.from("agent market");
      expect(verify(null, message, published, sign(null, message, privateKey))).toBe(true);

      if (intent === "buyer") expect(body).not.toHaveProperty("seller_activation");
      else expect(body.seller_activation).toEqual(expect.any(Object));

      const flower = await api("GET", "/api/welcome/flower", { key: body.api_key });
      expect(flower.status).toBe(200);
      expect(flower.body.agent_id).toBe(body.agent_id);
    },
  );

  it("stores only a hash of the API key and only the public signing key", async () => {
    const res = await api("POST", "/api/quickstart", { body: { name: uniqueName(), intent: "both" } });
    expect(res.status).toBe(201);
    const { agent_id: agentId, api_key: apiKey, signing_key: signingKey } = res.body;

    const keys = await db()("api_keys").where({ agent_id: agentId });
    expect(keys).toHaveLength(1);
    const row = keys[0]!;
    expect(row.key_hash).toBe(hashApiKey(apiKey));
    expect(row.last_four).toBe(apiKey.slice(-4));
    for (const value of Object.values(row)) {
      expect(value).not.toBe(apiKey);
      expect(String(value)).not.toContain(apiKey.slice(4));
    }

    const agent = await db()("agents").where({ id: agentId }).first();
    expect(agent.signing_public_key).toBe(res.body.signing_public_key);
    const audit = await db()("audit_events").where({ subject_type: "agent", subject_id: agentId });
    for (const stored of [agent, ...audit]) {
      const text = JSON.stringify(stored);
      expect(text).not.toContain(apiKey.slice(4));
      expect(text).not.toContain(signingKey);
    }
  });

  it("trims the name and ties the registration to the request id in the audit trail", async () => {
    const name = uniqueName();
    const requestId = `qs-${randomBytes(6).toString("hex")}`;
    const res = await api("POST", "/api/quickstart", {
      body: { name: `  ${name}  `, intent: "buyer" },
      headers: { "x-request-id": requestId },
    });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe(name);
    const audit = await db()("audit_events").where({ request_id: requestId });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ action: "agent.registered", actor_agent_id: res.body.agent_id });
  });

  it("accepts a 100-character name", async () => {
    const res = await api("POST", "/api/quickstart", { body: { name: "n".repeat(100), intent: "buyer" } });
    expect(res.status).toBe(201);
  });

  it("gives every registration a distinct agent and key", async () => {
    const [a, b] = await Promise.all(
      [0, 1].map(() => api("POST", "/api/quickstart", { body: { name: "same-name", intent: "buyer" } })),
    );
    expect(a!.status).toBe(201);
    expect(b!.status).toBe(201);
    expect(a!.body.agent_id).not.toBe(b!.body.agent_id);
    expect(a!.body.api_key).not.toBe(b!.body.api_key);
    expect(a!.body.signing_key).not.toBe(b!.body.signing_key);
  });
});

describe("POST /api/quickstart bad input", () => {
  it.each([
    ["missing name", { body: { intent: "buyer" } }, "/name"],
    ["missing intent", { body: { name: "x" } }, "/intent"],
    ["empty name", { body: { name: "", intent: "buyer" } }, "/name"],
    ["whitespace-only name", { body: { name: "   \t ", intent: "buyer" } }, "/name"],
    ["101-character name", { body: { name: "n".repeat(101), intent: "buyer" } }, "/name"],
    ["name not a string", { body: { name: 42, intent: "buyer" } }, "/name"],
    ["intent admin", { body: { name: "x", intent: "admin" } }, "/intent"],
    ["extra property", { body: { name: "x", intent: "buyer", role: "admin" } }, "/role"],
    ["body not JSON", { raw: "name=x&intent=buyer" }, "/"],
    ["JSON with a text/plain content type", { raw: "{}", headers: { "content-type": "text/plain" } }, "/"],
    ["JSON array body", { body: [{ name: "x", intent: "buyer" }] }, "/"],
    ["empty body", {}, "/name"],
  ])("%s → 400 SCHEMA_VALIDATION_FAILED naming %s", async (_name, options, path) => {
    const res = await api("POST", "/api/quickstart", options);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.success).toBe(false);
    expect(res.body.error.request_id).toBe(res.headers.get("x-request-id"));
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(path);
  });
});

describe("GET /api/quickstart", () => {
  it("describes how to register", async () => {
    const res = await api("GET", "/api/quickstart");
    expect(res.status).toBe(200);
    const base = getConfig().publicBaseUrl;
    expect(res.body.name).toEqual(expect.any(String));
    expect(res.body.description).toEqual(expect.any(String));
    expect(res.body.create_agent).toMatchObject({
      method: "POST",
      path: "/api/quickstart",
      url: `${base}/api/quickstart`,
      auth: false,
      content_type: "application/json",
    });
    expect(Object.keys(res.body.create_agent.body).sort()).toEqual(["intent", "name"]);
    expect(res.body.create_agent.intents).toEqual(["buyer", "seller", "both"]);
    expect(res.body.create_agent.returns).toEqual(
      expect.arrayContaining(["agent_id", "api_key", "signing_key"]),
    );
    expect(res.body.next_steps.length).toBeGreaterThan(0);
    expect(res.body.example).toEqual(expect.any(Object));
    expect(res.body.docs.openapi).toBe(`${base}/openapi.json`);
  });

  it("never creates an agent", async () => {
    // Other test files register agents in parallel, so a plain count is not stable: look instead for
    // agents created during the request that no other request registered.
    const requestId = `qs-info-${randomBytes(6).toString("hex")}`;
    const [{ now: from }] = (await db().raw("select now()")).rows;
    const res = await api("GET", "/api/quickstart", { headers: { "x-request-id": requestId } });
    const [{ now: to }] = (await db().raw("select now()")).rows;
    expect(res.status).toBe(200);
    expect(await db()("audit_events").where({ request_id: requestId })).toHaveLength(0);
    const unexplained = await db()("agents")
      .whereBetween("created_at", [from, to])
      .whereNotExists(
        db()("audit_events")
          .whereRaw("audit_events.subject_id = agents.id::text")
          .where("action", "agent.registered")
          .whereNot("request_id", requestId),
      );
    expect(unexplained).toEqual([]);
  });
});
