import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// Key scopes decide which listings a key may call — in match, execute and direct invoke — before any
// work is committed. Free listings here: the category and seller scopes apply to free and paid work
// alike (the price ceiling and spend limits are in spend-limits.test.ts, on a live paid gate).

let service: TestService;
let seller: TestSeller;
let alice: TestAgent;
let bob: TestAgent;

beforeAll(async () => {
  service = await startService();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  alice = await buildAgent("seller");
  bob = await buildAgent("seller");
});
afterAll(async () => {
  await seller.close();
  await service.stop();
});

const taskName = () => `scoped-${randomBytes(4).toString("hex")}`;

/** A buyer and a key of it with the given scopes (created through the API by the registration key). */
async function scopedBuyer(scopes: Record<string, unknown>): Promise<{ buyer: TestAgent; key: string }> {
  const buyer = await buildAgent();
  const res = await api("POST", "/api/keys", { key: buyer.apiKey, body: { scopes } });
  expect(res.status).toBe(201);
  return { buyer, key: res.body.api_key };
}

/** Rows a refused request must not have written, for one buyer. */
async function writes(agentId: string): Promise<number[]> {
  const count = async (table: string) =>
    Number((await db()(table).where({ agent_id: agentId }).count({ n: "*" }))[0]!.n);
  return [await count("invocations"), await count("idempotency_keys"), await count("receipts")];
}

/** Two listings per task: one of alice's in category "alpha", one of bob's in "beta". */
async function twoListings() {
  const task = taskName();
  const a = await buildListing({
    endpointUrl: seller.url,
    tags: [task],
    category: "alpha",
    sellerId: alice.agentId,
  });
  const b = await buildListing({
    endpointUrl: seller.url,
    tags: [task],
    category: "beta",
    sellerId: bob.agentId,
    verificationStatus: "verified",
  });
  return { task, a, b };
}

describe("scopes in match", () => {
  it.each([
    ["categories", () => ({ categories: ["alpha"] }), "outside_key_categories"],
    ["seller allowlist", () => ({ seller_allowlist: [alice.agentId] }), "seller_not_in_key_allowlist"],
    ["seller blocklist", () => ({ seller_blocklist: [bob.agentId] }), "seller_in_key_blocklist"],
  ])(
    "%s: the listing outside the scope is excluded with its reason, never offered",
    async (_n, scopes, reason) => {
      const { task, a, b } = await twoListings();
      const { buyer, key } = await scopedBuyer(scopes());
      const res = await api("GET", `/api/execute/match?task=${task}`, { key });
      expect(res.status).toBe(200);
      expect(res.body.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([a.id]);
      expect(res.body.excluded).toEqual([expect.objectContaining({ listing_id: b.id, reason })]);
      // The registration key of the same agent has no scopes: both are offered, the verified one first.
      const open = await api("GET", `/api/execute/match?task=${task}`, { key: buyer.apiKey });
      expect(open.body.candidates.map((c: { listing_id: string }) => c.listing_id)).toEqual([b.id, a.id]);
    },
  );
});

describe("scopes in execute", () => {
  it("routes only to listings inside the scopes; the excluded one is never called", async () => {
    const { task, a, b } = await twoListings();
    const { key } = await scopedBuyer({ seller_blocklist: [bob.agentId] });
    const before = seller.calls.length;
    const res = await api("POST", "/api/execute", { key, body: { task, input: { n: 1 } } });
    expect(res.status).toBe(200);
    expect(res.body.provider.listing_id).toBe(a.id);
    expect(res.body.selection.excluded).toEqual([{ listing_id: b.id, reason: "seller_in_key_blocklist" }]);
    expect(seller.calls.length - before).toBe(1);
  });

  it.each([
    ["categories", () => ({ categories: ["gamma"] }), "categories"],
    ["seller allowlist", () => ({ seller_allowlist: ["platform"] }), "seller_allowlist"],
    ["seller blocklist", () => ({ seller_blocklist: [alice.agentId, bob.agentId] }), "seller_blocklist"],
  ])(
    "%s excluding every candidate → 403 POLICY_BLOCKED naming the scope, nothing written",
    async (_n, scopes, scope) => {
      const { task } = await twoListings();
      const { buyer, key } = await scopedBuyer(scopes());
      const before = seller.calls.length;
      const res = await api("POST", "/api/execute", {
        key,
        body: { task, input: {}, idempotency_key: `k-${task}` },
      });
      expect([res.status, errorCode(res)]).toEqual([403, "POLICY_BLOCKED"]);
      expect(res.body.error.details.scopes).toEqual([scope]);
      expect(res.body.error.details.excluded).toHaveLength(2);
      expect(res.body.error.message).toContain(scope);
      expect(await writes(buyer.agentId)).toEqual([0, 0, 0]);
      expect(seller.calls.length).toBe(before);
    },
  );

  it("the platform's free echo check stays open to every scoped key (spec: no scopes required)", async () => {
    const { key } = await scopedBuyer({ categories: ["alpha"], seller_allowlist: [alice.agentId] });
    const res = await api("POST", "/api/execute", { key, body: { task: "echo", input: { message: "hi" } } });
    expect(res.status).toBe(200);
    expect(res.body.output.echo).toEqual({ message: "hi" });
  });
});

describe("scopes in direct invoke", () => {
  it.each([
    ["categories", () => ({ categories: ["alpha"] }), "categories", "outside_key_categories"],
    [
      "seller allowlist",
      () => ({ seller_allowlist: [alice.agentId] }),
      "seller_allowlist",
      "seller_not_in_key_allowlist",
    ],
    [
      "seller blocklist",
      () => ({ seller_blocklist: [bob.agentId] }),
      "seller_blocklist",
      "seller_in_key_blocklist",
    ],
  ])(
    "%s: a listing outside it → 403 POLICY_BLOCKED, never called; one inside runs",
    async (_n, scopes, scope, reason) => {
      const { a, b } = await twoListings();
      const { buyer, key } = await scopedBuyer(scopes());
      const before = seller.calls.length;
      const refused = await api("POST", `/api/invoke/${b.id}`, {
        key,
        body: { input: {}, idempotency_key: "x" },
      });
      expect([refused.status, errorCode(refused)]).toEqual([403, "POLICY_BLOCKED"]);
      expect(refused.body.error.details).toMatchObject({ listing_id: b.id, scope, reason });
      expect(await writes(buyer.agentId)).toEqual([0, 0, 0]);
      expect(seller.calls.length).toBe(before);
      const allowed = await api("POST", `/api/invoke/${a.id}`, { key, body: { input: {} } });
      expect(allowed.status).toBe(200);
      expect(seller.calls.length - before).toBe(1);
    },
  );

  it("the platform's free listings are open to every key, whatever its categories or seller lists", async () => {
    const task = taskName();
    const firstParty = await buildListing({ endpointUrl: seller.url, tags: [task], category: "alpha" });
    for (const scopes of [{ categories: ["beta"] }, { seller_blocklist: ["platform"] }]) {
      const { key } = await scopedBuyer(scopes);
      const res = await api("POST", `/api/invoke/${firstParty.id}`, { key, body: { input: {} } });
      expect(res.status, JSON.stringify(scopes)).toBe(200);
    }
  });
});
