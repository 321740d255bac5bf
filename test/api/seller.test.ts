import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listListingChanges } from "../../shared/catalog/store/listings.js";
import { db } from "../../shared/db/knex.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false });
});
afterAll(async () => service.stop());

function listingBody(overrides: Record<string, unknown> = {}) {
  return {
    name: "PDF table extractor",
    description: "Extracts tables from a PDF URL as CSV rows.",
    category: "devtools",
    endpoint_url: "http://127.0.0.1:9/invoke",
    pricing_model: "per_call",
    price_per_unit: 0.02,
    input_schema: { type: "object", required: ["url"], properties: { url: { type: "string" } } },
    tags: ["pdf", "tables"],
    ...overrides,
  };
}

async function publish(seller: TestAgent, overrides: Record<string, unknown> = {}) {
  return api("POST", "/api/capabilities", { key: seller.apiKey, body: listingBody(overrides) });
}

describe("GET /api/seller/status", () => {
  it("reports the free slot, the bond and a template, computed from the seller's listings", async () => {
    const seller = await buildAgent("seller");
    const before = await api("GET", "/api/seller/status", { key: seller.apiKey });
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({
      live_listings: 0,
      free_concurrent_listing_slots_remaining: 1,
      stake_required_for_next_listing: false,
      next_best_action: "publish_listing_with_a_concrete_endpoint",
    });
    expect(before.body.publish_listing_template.path).toBe("/api/capabilities");
    expect((await publish(seller)).status).toBe(201);
    const after = await api("GET", "/api/seller/status", { key: seller.apiKey });
    expect(after.body).toMatchObject({
      live_listings: 1,
      free_concurrent_listing_slots_remaining: 0,
      stake_required_for_next_listing: true,
    });
  });
});

describe("POST /api/capabilities", () => {
  it("publishes a listing: 201 with the record, price stored as integer micro-USDC", async () => {
    const seller = await buildAgent("seller");
    const res = await publish(seller, { price_per_unit: 0.123456 });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: "PDF table extractor",
      status: "active",
      version: "1.0.0",
      price_per_unit: 0.123456,
    });
    const row = await db()("listings").where({ id: res.body.id }).first();
    expect(row.price_micros).toBe("123456");
    expect(row.seller_id).toBe(seller.agentId);
    expect(res.headers.get("location")).toBe(`/api/capabilities/${res.body.id}`);
  });

  it("buyers cannot publish: 403 POLICY_BLOCKED", async () => {
    const buyer = await buildAgent("buyer");
    const res = await publish(buyer);
    expect(res.status).toBe(403);
    expect(errorCode(res)).toBe("POLICY_BLOCKED");
  });

  it("a second live listing needs the bond: 402 naming its terms, and nothing is created", async () => {
    const seller = await buildAgent("both");
    expect((await publish(seller)).status).toBe(201);
    const second = await publish(seller, { name: "Second listing" });
    expect(second.status).toBe(402);
    expect(errorCode(second)).toBe("PAYMENT_REQUIRED");
    expect(second.body.error.details).toMatchObject({
      bond_usdc: "1.000000",
      free_concurrent_listing_slots: 1,
    });
    const count = await db()("listings").where({ seller_id: seller.agentId }).count({ n: "*" });
    expect(Number(count[0]!.n)).toBe(1);
  });

  it("concurrent publishes cannot share the one free slot", async () => {
    const seller = await buildAgent("seller");
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => publish(seller, { name: `Race listing ${i}` })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 402)).toHaveLength(5);
  });

  it.each([
    ["server-owned status", { status: "active" }, "/status"],
    ["server-owned featured", { featured: 1 }, "/featured"],
    ["server-owned verification_status", { verification_status: "verified" }, "/verification_status"],
    ["server-owned id", { id: "00000000-0000-4000-8000-000000000000" }, "/id"],
    ["server-owned seller_id", { seller_id: "00000000-0000-4000-8000-000000000000" }, "/seller_id"],
    ["server-owned counters", { total_invocations: 1000 }, "/total_invocations"],
    ["server-owned review fields", { review_status: "approved" }, "/review_status"],
    ["server-owned trust fields", { seller_trust_score: 100 }, "/seller_trust_score"],
    ["name too short", { name: "ab" }, "/name"],
    ["description too long", { description: "x".repeat(2001) }, "/description"],
    ["bad category", { category: "Not A Category!" }, "/category"],
    ["pricing model", { pricing_model: "subscription" }, "/pricing_model"],
    ["negative price", { price_per_unit: -1 }, "/price_per_unit"],
    ["too many decimals", { price_per_unit: 0.1234567 }, "/price_per_unit"],
    ["too many tags", { tags: Array.from({ length: 13 }, (_, i) => `t${i}`) }, "/tags"],
    ["bad tag", { tags: ["Has Space"] }, "/tags/0"],
    ["input_schema that does not compile", { input_schema: { type: "no-such-type" } }, "/input_schema"],
    [
      "output_schema that does not compile",
      { output_schema: { properties: { a: { minimum: "x" } } } },
      "/output_schema",
    ],
    ["endpoint not a URL", { endpoint_url: "not a url at all" }, "/endpoint_url"],
    ["endpoint ftp", { endpoint_url: "ftp://example.com/x" }, "/endpoint_url"],
    ["endpoint with credentials", { endpoint_url: "http://user:pw@127.0.0.1/x" }, "/endpoint_url"],
    ["endpoint private address", { endpoint_url: "http://10.0.0.5/invoke" }, "/endpoint_url"],
    ["endpoint metadata address", { endpoint_url: "http://169.254.169.254/latest" }, "/endpoint_url"],
    ["endpoint CGNAT address", { endpoint_url: "http://100.64.1.1/x" }, "/endpoint_url"],
    ["endpoint IPv6 loopback", { endpoint_url: "http://[::1]/x" }, "/endpoint_url"],
    ["endpoint IPv4-mapped private", { endpoint_url: "http://[::ffff:192.168.0.1]/x" }, "/endpoint_url"],
    ["endpoint decimal loopback", { endpoint_url: "http://2130706434/x" }, "/endpoint_url"],
    ["endpoint .internal name", { endpoint_url: "http://billing.internal/x" }, "/endpoint_url"],
    ["endpoint single-label name", { endpoint_url: "http://intranet/x" }, "/endpoint_url"],
  ])("%s → 400 SCHEMA_VALIDATION_FAILED at %s, nothing created", async (_name, overrides, path) => {
    const seller = await buildAgent("seller");
    const res = await publish(seller, overrides);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(path);
    const count = await db()("listings").where({ seller_id: seller.agentId }).count({ n: "*" });
    expect(Number(count[0]!.n)).toBe(0);
  });

  it("quotes ajv's own message for a schema that does not compile", async () => {
    const seller = await buildAgent("seller");
    const res = await publish(seller, { input_schema: { type: "no-such-type" } });
    expect(res.body.error.details.violations[0].message).toMatch(/type/);
  });

  it("needs a key", async () => {
    const res = await api("POST", "/api/capabilities", { body: listingBody() });
    expect(res.status).toBe(401);
  });
});

describe("PATCH and DELETE /api/capabilities/{id}", () => {
  it("a contract change bumps the minor version and records the price change; a descriptive one bumps the patch", async () => {
    const seller = await buildAgent("seller");
    const created = await publish(seller);
    const id = created.body.id;
    const priced = await api("PATCH", `/api/capabilities/${id}`, {
      key: seller.apiKey,
      body: { price_per_unit: 0.05 },
    });
    expect(priced.status).toBe(200);
    expect(priced.body).toMatchObject({ version: "1.1.0", price_per_unit: 0.05 });
    const described = await api("PATCH", `/api/capabilities/${id}`, {
      key: seller.apiKey,
      body: { description: "Extracts every table from a PDF." },
    });
    expect(described.body.version).toBe("1.1.1");
    const history = await listListingChanges(db(), id);
    expect(
      history.map((h) => [h.from_version, h.to_version, h.from_price_micros, h.to_price_micros]),
    ).toEqual([
      ["1.0.0", "1.1.0", "20000", "50000"],
      ["1.1.0", "1.1.1", "50000", "50000"],
    ]);
    expect(history[0]!.fields).toEqual(["price_micros"]);
  });

  it("another seller's listing reads as 404 for PATCH and DELETE; bad bodies are 400", async () => {
    const owner = await buildAgent("seller");
    const other = await buildAgent("seller");
    const id = (await publish(owner)).body.id;
    expect(
      (
        await api("PATCH", `/api/capabilities/${id}`, {
          key: other.apiKey,
          body: { description: "taken over!!" },
        })
      ).status,
    ).toBe(404);
    expect((await api("DELETE", `/api/capabilities/${id}`, { key: other.apiKey })).status).toBe(404);
    expect((await api("PATCH", `/api/capabilities/${id}`, { key: owner.apiKey, body: {} })).status).toBe(400);
    expect(
      (await api("PATCH", `/api/capabilities/${id}`, { key: owner.apiKey, body: { status: "retired" } }))
        .status,
    ).toBe(400);
    expect(
      (
        await api("PATCH", "/api/capabilities/not-a-uuid", {
          key: owner.apiKey,
          body: { description: "whatever it is" },
        })
      ).status,
    ).toBe(404);
  });

  it("DELETE retires the listing, frees the slot and keeps the record readable", async () => {
    const seller = await buildAgent("seller");
    const id = (await publish(seller)).body.id;
    const retired = await api("DELETE", `/api/capabilities/${id}`, { key: seller.apiKey });
    expect(retired.status).toBe(200);
    expect(retired.body.status).toBe("retired");
    expect((await api("GET", `/api/capabilities/${id}`)).body.status).toBe("retired");
    expect((await publish(seller, { name: "Replacement listing" })).status).toBe(201);
    const patch = await api("PATCH", `/api/capabilities/${id}`, {
      key: seller.apiKey,
      body: { description: "too late for this" },
    });
    expect(patch.status).toBe(422);
    expect(errorCode(patch)).toBe("LISTING_NOT_INVOCABLE");
  });
});
