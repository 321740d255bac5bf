import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { type ApiResponse, api, errorCode } from "../helpers/http.js";
import { json, startGatedSeller, startSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => service.stop());

function newKey(): string {
  return `idem-${randomBytes(8).toString("hex")}`;
}

function execute(agent: TestAgent, body: Record<string, unknown>, key?: string): Promise<ApiResponse> {
  return api("POST", "/api/execute", {
    key: agent.apiKey,
    body,
    headers: key === undefined ? {} : { "x-idempotency-key": key },
  });
}

async function invocationCount(agent: TestAgent): Promise<number> {
  const [row] = await db()("invocations").where({ agent_id: agent.agentId }).count({ n: "*" });
  return Number(row!.n);
}

async function keyRows(agent: TestAgent, key: string) {
  return db()("idempotency_keys").where({ agent_id: agent.agentId, key });
}

describe("idempotent replay", () => {
  it("the same X-Idempotency-Key and body twice replays the first outcome without a second invocation", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const body = { task: "echo", input: { message: "once" } };

    const first = await execute(agent, body, key);
    expect(first.status).toBe(200);
    expect(first.headers.get("idempotent-replayed")).toBeNull();

    const second = await execute(agent, body, key);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body.invocation_id).toBe(first.body.invocation_id);
    expect(second.body.receipt_id).toBe(first.body.receipt_id);
    expect(second.body.output).toEqual(first.body.output);

    const keys = await keyRows(agent, key);
    expect(keys).toHaveLength(1);
    expect(keys[0].invocation_id).toBe(first.body.invocation_id);
    expect(await invocationCount(agent)).toBe(1);
    expect(await db()("receipts").where({ invocation_id: first.body.invocation_id })).toHaveLength(1);
  });

  it("the body's idempotency_key replays the same way", async () => {
    const agent = await buildAgent();
    const body = { task: "echo", input: { message: "body key" }, idempotency_key: newKey() };

    const first = await execute(agent, body);
    const second = await execute(agent, body);
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body.invocation_id).toBe(first.body.invocation_id);
    expect(second.body.receipt_id).toBe(first.body.receipt_id);
    expect(await invocationCount(agent)).toBe(1);
  });

  it("a header key and the same key in the body are one key", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const first = await execute(agent, { task: "echo", input: {}, idempotency_key: key }, key);
    expect(first.status).toBe(200);
    const second = await execute(agent, { task: "echo", input: {} }, key);
    expect(second.status).toBe(200);
    expect(second.body.invocation_id).toBe(first.body.invocation_id);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
  });

  it("a failed invocation replays its failure without calling the seller again", async () => {
    const seller = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
    try {
      const agent = await buildAgent();
      const listing = await buildListing({ endpointUrl: seller.url, safeToRetry: false });
      const key = newKey();
      const body = { task: listing.slug, input: {} };

      const first = await execute(agent, body, key);
      expect(first.status).toBe(502);
      expect(errorCode(first)).toBe("PROVIDER_FAILED");

      const second = await execute(agent, body, key);
      expect(second.status).toBe(502);
      expect(errorCode(second)).toBe("PROVIDER_FAILED");
      expect(second.body.error.details.invocation_id).toBe(first.body.error.details.invocation_id);
      expect(seller.calls).toHaveLength(1);
      expect(await invocationCount(agent)).toBe(1);
    } finally {
      await seller.close();
    }
  });

  it("key order inside the input does not change the fingerprint: a replay, not 422", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const first = await execute(agent, { task: "echo", input: { a: 1, b: 2, nested: { x: 1, y: 2 } } }, key);
    const second = await execute(agent, { input: { nested: { y: 2, x: 1 }, b: 2, a: 1 }, task: "echo" }, key);
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(second.body.invocation_id).toBe(first.body.invocation_id);
  });

  it("two agents may use the same key independently", async () => {
    const one = await buildAgent();
    const two = await buildAgent();
    const key = newKey();
    const body = { task: "echo", input: { message: "shared key" } };

    const a = await execute(one, body, key);
    const b = await execute(two, body, key);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    expect(b.body.invocation_id).not.toBe(a.body.invocation_id);
    expect(b.body.receipt_id).not.toBe(a.body.receipt_id);
    expect(await invocationCount(one)).toBe(1);
    expect(await invocationCount(two)).toBe(1);

    // Each agent's replay returns its own invocation.
    const replay = await execute(two, body, key);
    expect(replay.body.invocation_id).toBe(b.body.invocation_id);
  });
});

describe("idempotency conflicts", () => {
  it("header and body keys that differ → 400, nothing created", async () => {
    const agent = await buildAgent();
    const res = await execute(agent, { task: "echo", input: {}, idempotency_key: newKey() }, newKey());
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(
      "/idempotency_key",
    );
    expect(await invocationCount(agent)).toBe(0);
  });

  it("the same key with a different input → 422 IDEMPOTENCY_KEY_REUSED naming the first invocation", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const first = await execute(agent, { task: "echo", input: { message: "one" } }, key);
    expect(first.status).toBe(200);

    const second = await execute(agent, { task: "echo", input: { message: "two" } }, key);
    expect(second.status).toBe(422);
    expect(errorCode(second)).toBe("IDEMPOTENCY_KEY_REUSED");
    expect(second.body.error.details.invocation_id).toBe(first.body.invocation_id);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(await invocationCount(agent)).toBe(1);
  });

  it("the same key with a different max_cost → 422 IDEMPOTENCY_KEY_REUSED", async () => {
    const agent = await buildAgent();
    const key = newKey();
    expect((await execute(agent, { task: "echo", input: {} }, key)).status).toBe(200);
    const second = await execute(agent, { task: "echo", input: {}, constraints: { max_cost: 1 } }, key);
    expect(second.status).toBe(422);
    expect(errorCode(second)).toBe("IDEMPOTENCY_KEY_REUSED");
  });

  it("the same key while the first request is still running → 409, then a replay once it ends", async () => {
    const seller = await startGatedSeller();
    const release = seller.release;
    try {
      const agent = await buildAgent();
      const listing = await buildListing({ endpointUrl: seller.url });
      const key = newKey();
      const body = { task: listing.slug, input: { n: 1 } };

      overrideConfig({ executeSyncWaitMs: 100 });
      let first: ApiResponse;
      try {
        first = await execute(agent, body, key);
      } finally {
        overrideConfig({ executeSyncWaitMs: 5000 });
      }
      expect(first.status).toBe(202);
      const invocationId = first.body.invocation_id;

      const second = await execute(agent, body, key);
      expect(second.status).toBe(409);
      expect(errorCode(second)).toBe("IDEMPOTENCY_KEY_IN_USE");
      expect(second.body.error.details.invocation_id).toBe(invocationId);
      expect(["queued", "running"]).toContain(second.body.error.details.status);

      release();
      await expect
        .poll(
          async () =>
            (await api("GET", `/api/execute/status/${invocationId}`, { key: agent.apiKey })).body.status,
        )
        .toBe("succeeded");

      const third = await execute(agent, body, key);
      expect(third.status).toBe(200);
      expect(third.headers.get("idempotent-replayed")).toBe("true");
      expect(third.body.invocation_id).toBe(invocationId);
      expect(third.body.output).toEqual({ done: true });
      expect(third.body.receipt_id).toEqual(expect.any(String));
      expect(seller.calls).toHaveLength(1);
      expect(await invocationCount(agent)).toBe(1);
    } finally {
      release();
      await seller.close();
    }
  });

  it("20 concurrent requests with one key create one invocation; each answer is 200 or 409, never 500", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const body = { task: "echo", input: { message: "stampede" } };

    const answers = await Promise.all(Array.from({ length: 20 }, () => execute(agent, body, key)));
    const statuses = answers.map((a) => a.status);
    for (const status of statuses) expect([200, 409]).toContain(status);

    const originals = answers.filter(
      (a) => a.status === 200 && a.headers.get("idempotent-replayed") === null,
    );
    expect(originals).toHaveLength(1);
    const invocationId = originals[0]!.body.invocation_id;
    for (const a of answers) {
      if (a.status === 200) expect(a.body.invocation_id).toBe(invocationId);
      else {
        expect(errorCode(a)).toBe("IDEMPOTENCY_KEY_IN_USE");
        expect(a.body.error.details.invocation_id).toBe(invocationId);
      }
    }
    expect(await invocationCount(agent)).toBe(1);
    expect(await keyRows(agent, key)).toHaveLength(1);
    expect(await db()("receipts").where({ invocation_id: invocationId })).toHaveLength(1);
  });
});

describe("what a key does not save", () => {
  it.each([
    ["input failing the listing's schema", { task: "echo", input: { message: "x".repeat(4001) } }, 400],
    ["input that is not an object", { task: "echo", input: "x" }, 400],
    ["an unknown task", { task: "no-such-task-anywhere", input: {} }, 404],
  ])(
    "%s with a key saves nothing: the key then runs a valid request normally",
    async (_name, bad, status) => {
      const agent = await buildAgent();
      const key = newKey();
      const rejected = await execute(agent, bad, key);
      expect(rejected.status).toBe(status);
      expect(await keyRows(agent, key)).toHaveLength(0);
      expect(await invocationCount(agent)).toBe(0);

      const valid = await execute(agent, { task: "echo", input: { message: "now valid" } }, key);
      expect(valid.status).toBe(200);
      expect(valid.headers.get("idempotent-replayed")).toBeNull();
      expect(valid.body.output.echo).toEqual({ message: "now valid" });
      expect(await invocationCount(agent)).toBe(1);
    },
  );

  it.each([
    ["header", (key: string) => ({ body: { task: "echo", input: {} }, header: key })],
    ["body", (key: string) => ({ body: { task: "echo", input: {}, idempotency_key: key } })],
  ])("a %s key longer than 255 characters → 400, nothing created", async (_where, build) => {
    const agent = await buildAgent();
    const { body, header } = build("k".repeat(256)) as { body: Record<string, unknown>; header?: string };
    const res = await execute(agent, body, header);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(await invocationCount(agent)).toBe(0);
  });

  it("a key of exactly 255 characters is accepted", async () => {
    const agent = await buildAgent();
    const key = `${newKey()}${"k".repeat(255)}`.slice(0, 255);
    const res = await execute(agent, { task: "echo", input: {} }, key);
    expect(res.status).toBe(200);
    expect(await keyRows(agent, key)).toHaveLength(1);
  });

  it("a key with a space or control character → 400", async () => {
    const agent = await buildAgent();
    const res = await execute(agent, { task: "echo", input: {}, idempotency_key: "has space" });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    const empty = await execute(agent, { task: "echo", input: {}, idempotency_key: "" });
    expect(empty.status).toBe(400);
    expect(await invocationCount(agent)).toBe(0);
  });
});

describe("retention", () => {
  it("an expired key starts a new invocation even before the purge removes it", async () => {
    const agent = await buildAgent();
    const key = newKey();
    const first = await execute(agent, { task: "echo", input: { n: 1 } }, key);
    expect(first.status).toBe(200);
    await db()("idempotency_keys")
      .where({ agent_id: agent.agentId, key })
      .update({ expires_at: db().raw("now() - interval '1 second'") });
    const second = await execute(agent, { task: "echo", input: { n: 2 } }, key);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(second.body.invocation_id).not.toBe(first.body.invocation_id);
    const third = await execute(agent, { task: "echo", input: { n: 2 } }, key);
    expect(third.headers.get("idempotent-replayed")).toBe("true");
    expect(third.body.invocation_id).toBe(second.body.invocation_id);
  });
});
