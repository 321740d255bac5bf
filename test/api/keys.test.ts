import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { hashApiKey } from "../../shared/identity/api-keys.js";
import { freePort } from "../../shared/infra/free-port.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startProcess, waitFor } from "../helpers/processes.js";
import { startService, type TestService } from "../helpers/service.js";

// API key management: creation with scopes and limits (shown once), display (prefix and last four
// only), who may manage which key, rotation with a grace period, revocation in every API process.

let service: TestService;
let root: TestAgent;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
  root = await buildAgent();
});
afterAll(async () => service.stop());

const FULL_SPEC = {
  name: "research bot",
  scopes: {
    categories: ["research", "search"],
    max_price_usdc: 0.5,
    seller_allowlist: [randomUUID(), "platform"],
  },
  limits: { per_call_usdc: 0.25, daily_cap_usdc: 2 },
  approval_above_usdc: 0.1,
};

async function createKey(key: string, body: unknown) {
  return api("POST", "/api/keys", { key, body });
}

async function keyCount(agentId: string): Promise<number> {
  const [row] = await db()("api_keys").where({ agent_id: agentId }).count({ n: "*" });
  return Number(row!.n);
}

const flower = (key: string, baseUrl?: string) => api("GET", "/api/welcome/flower", { key, baseUrl });

describe("POST /api/keys and GET /api/keys", () => {
  it("creates a scoped key shown once; the list shows prefix and last four, never the key or its hash", async () => {
    const res = await createKey(root.apiKey, FULL_SPEC);
    expect(res.status).toBe(201);
    const secret: string = res.body.api_key;
    expect(secret).toMatch(/^amk_[0-9A-Za-z]{38}$/);
    expect(res.body.key).toMatchObject({
      name: "research bot",
      prefix: "amk_",
      last_four: secret.slice(-4),
      display: `amk_…${secret.slice(-4)}`,
      status: "active",
      current: false,
      scopes: {
        categories: ["research", "search"],
        max_price_usdc: "0.500000",
        seller_allowlist: FULL_SPEC.scopes.seller_allowlist,
        seller_blocklist: null,
      },
      limits: { per_call_usdc: "0.250000", daily_cap_usdc: "2.000000" },
      approval_above_usdc: "0.100000",
      supervisor: false,
      manage_keys: false,
      today: { reserved_usdc: "0.000000", spent_usdc: "0.000000", remaining_usdc: "2.000000" },
      rotated_at: null,
      previous_secret: null,
      revoked_at: null,
    });
    expect(res.body.key.created_by_key_id).toBeTruthy();
    const today = new Date().toISOString().slice(0, 10);
    expect(res.body.key.today.day).toBe(today);
    expect(res.body.key.today.resets_at).toBe(
      new Date(Date.parse(`${today}T00:00:00Z`) + 86_400_000).toISOString(),
    );

    const list = await api("GET", "/api/keys", { key: root.apiKey });
    expect(list.status).toBe(200);
    expect(list.body.visible).toBe("agent");
    const ids = list.body.keys.map((k: { key_id: string }) => k.key_id);
    expect(ids).toContain(res.body.key.key_id);
    expect(list.body.keys.find((k: { current: boolean }) => k.current).key_id).toBe(list.body.current_key_id);
    for (const token of [secret, root.apiKey]) {
      expect(list.text).not.toContain(token);
      expect(list.text).not.toContain(hashApiKey(token));
    }
    expect(list.text).not.toContain("key_hash");

    // The new key works, for the same agent, and sees only itself.
    expect((await flower(secret)).body.agent_id).toBe(root.agentId);
    const own = await api("GET", "/api/keys", { key: secret });
    expect(own.body.visible).toBe("this_key");
    expect(own.body.keys.map((k: { key_id: string }) => k.key_id)).toEqual([res.body.key.key_id]);

    const audit = await db()("audit_events").where({
      subject_type: "api_key",
      subject_id: res.body.key.key_id,
    });
    expect(audit.map((a) => a.action)).toEqual(["api_key.created"]);
    expect(JSON.stringify(audit)).not.toContain(secret);
  });

  it("the registration key is unrestricted: supervisor and manage_keys, no scopes or limits", async () => {
    const agent = await buildAgent();
    const list = await api("GET", "/api/keys", { key: agent.apiKey });
    expect(list.body.keys).toHaveLength(1);
    expect(list.body.keys[0]).toMatchObject({
      current: true,
      supervisor: true,
      manage_keys: true,
      created_by_key_id: null,
      scopes: { categories: null, max_price_usdc: null, seller_allowlist: null, seller_blocklist: null },
      limits: { per_call_usdc: null, daily_cap_usdc: null },
      approval_above_usdc: null,
      today: { remaining_usdc: null },
    });
  });

  it.each([
    ["both seller lists", { scopes: { seller_allowlist: ["platform"], seller_blocklist: [randomUUID()] } }],
    ["more than 6 decimals", { limits: { per_call_usdc: 0.0000001 } }],
    ["a negative cap", { limits: { daily_cap_usdc: -1 } }],
    ["an unknown field", { scopes: { wallets: [] } }],
    ["a seller that is not an agent id", { scopes: { seller_blocklist: ["someone"] } }],
    ["a bad category", { scopes: { categories: ["Not A Category"] } }],
  ])("refuses %s with 400 and creates nothing", async (_name, body) => {
    const agent = await buildAgent();
    const res = await createKey(agent.apiKey, body);
    expect([res.status, errorCode(res)]).toEqual([400, "SCHEMA_VALIDATION_FAILED"]);
    expect(await keyCount(agent.agentId)).toBe(1);
  });
});

describe("who may manage keys", () => {
  it("a key without manage_keys cannot create keys: 403, nothing written", async () => {
    const agent = await buildAgent();
    const scoped = (await createKey(agent.apiKey, { limits: { daily_cap_usdc: 1 } })).body.api_key;
    const res = await createKey(scoped, {});
    expect([res.status, errorCode(res)]).toEqual([403, "POLICY_BLOCKED"]);
    expect(res.body.error.details.required).toBe("manage_keys");
    expect(await keyCount(agent.agentId)).toBe(2);
  });

  it("a manager never grants wider scopes, limits or powers than it has, and may grant narrower ones", async () => {
    const agent = await buildAgent();
    const manager = (
      await createKey(agent.apiKey, {
        manage_keys: true,
        scopes: { categories: ["research"], seller_blocklist: [randomUUID()] },
        limits: { daily_cap_usdc: 1 },
      })
    ).body;
    const blocked = manager.key.scopes.seller_blocklist[0];
    const wider = await createKey(manager.api_key, {
      scopes: { categories: ["research", "search"] },
      limits: { daily_cap_usdc: 5 },
      supervisor: true,
    });
    expect([wider.status, errorCode(wider)]).toEqual([403, "POLICY_BLOCKED"]);
    expect(wider.body.error.details.wider.sort()).toEqual(
      ["categories", "daily_cap_usdc", "seller_blocklist", "supervisor"].sort(),
    );
    expect(await keyCount(agent.agentId)).toBe(2);

    const narrower = await createKey(manager.api_key, {
      scopes: { categories: ["research"], seller_blocklist: [blocked, randomUUID()] },
      limits: { daily_cap_usdc: 0.5, per_call_usdc: 0.1 },
    });
    expect(narrower.status).toBe(201);
    expect(narrower.body.key.created_by_key_id).toBe(manager.key.key_id);

    // A scoped manager cannot rotate or revoke the wider registration key.
    const rootId = (await api("GET", "/api/keys", { key: agent.apiKey })).body.current_key_id;
    for (const action of ["rotate", "revoke"]) {
      const res = await api("POST", `/api/keys/${rootId}/${action}`, { key: manager.api_key, body: {} });
      expect([res.status, errorCode(res)], action).toEqual([403, "POLICY_BLOCKED"]);
    }
    expect((await flower(agent.apiKey)).status).toBe(200);
    // It may revoke the narrower key it made.
    const revoked = await api("POST", `/api/keys/${narrower.body.key.key_id}/revoke`, {
      key: manager.api_key,
      body: { reason: "no longer needed" },
    });
    expect(revoked.status).toBe(200);
    expect(revoked.body.key.status).toBe("revoked");
    expect((await flower(narrower.body.api_key)).status).toBe(401);
  });

  it("another agent's key, an unknown id and a malformed id are all 404, and nothing changes", async () => {
    const other = await buildAgent();
    const victim = (await createKey(other.apiKey, {})).body;
    for (const id of [victim.key.key_id, randomUUID(), "not-a-uuid"]) {
      for (const action of ["rotate", "revoke"]) {
        const res = await api("POST", `/api/keys/${id}/${action}`, { key: root.apiKey, body: {} });
        expect([res.status, errorCode(res)], `${action} ${id}`).toEqual([404, "NOT_FOUND"]);
      }
    }
    expect((await flower(victim.api_key)).status).toBe(200);
    const row = await db()("api_keys").where({ id: victim.key.key_id }).first();
    expect(row).toMatchObject({ revoked_at: null, rotated_at: null });
  });

  it("any key may rotate or revoke itself", async () => {
    const agent = await buildAgent();
    const scoped = (await createKey(agent.apiKey, { scopes: { categories: ["research"] } })).body;
    const rotated = await api("POST", `/api/keys/${scoped.key.key_id}/rotate`, {
      key: scoped.api_key,
      body: { grace_seconds: 0 },
    });
    expect(rotated.status).toBe(200);
    expect((await flower(scoped.api_key)).status).toBe(401);
    const revoked = await api("POST", `/api/keys/${scoped.key.key_id}/revoke`, {
      key: rotated.body.api_key,
      body: {},
    });
    expect(revoked.body.key.status).toBe("revoked");
    expect((await flower(rotated.body.api_key)).status).toBe(401);
  });
});

describe("rotation", () => {
  it("keeps the key's id and scopes; the old secret works inside the grace period and is 401 after", async () => {
    const agent = await buildAgent();
    const created = (await createKey(agent.apiKey, FULL_SPEC)).body;
    const res = await api("POST", `/api/keys/${created.key.key_id}/rotate`, {
      key: agent.apiKey,
      body: { grace_seconds: 1 },
    });
    expect(res.status).toBe(200);
    const fresh: string = res.body.api_key;
    expect(fresh).not.toBe(created.api_key);
    expect(res.body.key).toMatchObject({
      key_id: created.key.key_id,
      last_four: fresh.slice(-4),
      scopes: created.key.scopes,
      limits: created.key.limits,
      approval_above_usdc: "0.100000",
      previous_secret: { last_four: created.api_key.slice(-4) },
    });
    expect(res.body.key.rotated_at).toBeTruthy();
    const validUntil = Date.parse(res.body.key.previous_secret.valid_until);
    expect(validUntil - Date.parse(res.body.key.rotated_at)).toBe(1000);

    expect((await flower(fresh)).status).toBe(200);
    expect((await flower(created.api_key)).status).toBe(200);
    await new Promise((r) => setTimeout(r, Math.max(0, validUntil - Date.now()) + 300));
    const expired = await flower(created.api_key);
    expect(expired.status).toBe(401);
    expect(expired.body.error.message).toMatch(/rotated/);
    expect((await flower(fresh)).status).toBe(200);

    const audit = await db()("audit_events").where({
      subject_type: "api_key",
      subject_id: created.key.key_id,
    });
    expect(audit.map((a) => a.action)).toEqual(["api_key.created", "api_key.rotated"]);
    expect(audit[1].data).toMatchObject({ grace_seconds: 1 });
  });

  it("defaults to KEY_ROTATION_GRACE_SECONDS and refuses a longer grace", async () => {
    const agent = await buildAgent();
    const created = (await createKey(agent.apiKey, {})).body;
    const tooLong = await api("POST", `/api/keys/${created.key.key_id}/rotate`, {
      key: agent.apiKey,
      body: { grace_seconds: 3601 },
    });
    expect([tooLong.status, errorCode(tooLong)]).toEqual([400, "SCHEMA_VALIDATION_FAILED"]);
    const res = await api("POST", `/api/keys/${created.key.key_id}/rotate`, { key: agent.apiKey });
    expect(res.status).toBe(200);
    const grace = Date.parse(res.body.key.previous_secret.valid_until) - Date.parse(res.body.key.rotated_at);
    expect(grace).toBe(3600 * 1000);
    expect((await flower(created.api_key)).status).toBe(200);
    // Rotating again ends the earlier grace at once: only one previous secret is kept.
    const again = await api("POST", `/api/keys/${created.key.key_id}/rotate`, { key: agent.apiKey });
    expect((await flower(created.api_key)).status).toBe(401);
    expect((await flower(res.body.api_key)).status).toBe(200);
    expect((await flower(again.body.api_key)).status).toBe(200);
  });

  it("a revoked key cannot be rotated (409) and revoking twice answers the same, audited once", async () => {
    const agent = await buildAgent();
    const created = (await createKey(agent.apiKey, {})).body;
    const id = created.key.key_id;
    const first = await api("POST", `/api/keys/${id}/revoke`, {
      key: agent.apiKey,
      body: { reason: "leak" },
    });
    const second = await api("POST", `/api/keys/${id}/revoke`, { key: agent.apiKey, body: {} });
    expect(second.body.key.revoked_at).toBe(first.body.key.revoked_at);
    const rotate = await api("POST", `/api/keys/${id}/rotate`, { key: agent.apiKey, body: {} });
    expect([rotate.status, errorCode(rotate)]).toEqual([409, "CONFLICT"]);
    const audit = await db()("audit_events").where({ subject_type: "api_key", subject_id: id });
    expect(audit.map((a) => a.action)).toEqual(["api_key.created", "api_key.revoked"]);
    expect(audit[1].data).toMatchObject({ reason: "leak" });
  });
});

describe("revocation across API processes", () => {
  it("a key revoked through one API process is refused by another on its next request", async () => {
    const port = await freePort();
    const other = startProcess("dist/api/main.js", [], { LOG_LEVEL: "warn", PORT: String(port) });
    const otherBase = `http://127.0.0.1:${port}`;
    try {
      await waitFor(
        "the second API",
        async () => (await api("GET", "/api/stats", { baseUrl: otherBase })).status === 200,
      );
      const agent = await buildAgent();
      const created = (await createKey(agent.apiKey, {})).body;
      expect((await flower(created.api_key, otherBase)).status).toBe(200);
      expect((await flower(created.api_key)).status).toBe(200);
      const revoked = await api("POST", `/api/keys/${created.key.key_id}/revoke`, {
        key: agent.apiKey,
        body: {},
      });
      expect(revoked.status).toBe(200);
      const there = await flower(created.api_key, otherBase);
      expect([there.status, errorCode(there)]).toEqual([401, "UNAUTHORIZED"]);
      expect(there.body.error.message).toMatch(/revoked/);
      expect((await flower(created.api_key)).status).toBe(401);
      // And the other way round: revoked there, refused here.
      const second = (await createKey(agent.apiKey, {})).body;
      await api("POST", `/api/keys/${second.key.key_id}/revoke`, {
        key: agent.apiKey,
        body: {},
        baseUrl: otherBase,
      });
      expect((await flower(second.api_key)).status).toBe(401);
    } finally {
      other.child.kill("SIGTERM");
      expect(await other.exited).toBe(0);
    }
  });
});
