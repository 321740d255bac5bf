import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { type ApiResponse, api } from "../helpers/http.js";
import { fundAgent, usdc } from "../helpers/money.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The authorization matrix (docs/reliability.md "Authorization matrix"): every route that reads or
// changes an owned thing, called by the owner, by another agent, with a revoked key of the owner, with
// a key of the owner that lacks the power, and with no key. Another agent's thing answers 404 exactly
// like an unknown id, never its data; a revoked or missing key 401; a key without the power 403 where
// the docs say so. Refused changes change nothing: each mutation is checked against the row afterwards.

const ADMIN_KEY = `admin-${randomBytes(24).toString("hex")}`;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;

interface Keys {
  owner: string;
  foreign: string;
  revoked: string;
  /** A key of the owner's agent with no power (not manage_keys, not supervisor). */
  plain: string;
}
let keys: Keys;
let owner: TestAgent;
const ids = {
  invocation: "",
  receipt: "",
  quote: "",
  approval: "",
  askerKey: "",
  listing: "",
  deposit: "",
  order: "",
  subscription: "",
  connector: "",
};

async function newKey(agentKey: string, body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const res = await api("POST", "/api/keys", { key: agentKey, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.key.key_id, key: res.body.api_key };
}

beforeAll(async () => {
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ adminApiKey: ADMIN_KEY });
  service = await startService();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  const otherSeller = await buildAgent("seller");
  owner = await buildAgent("both");
  await fundAgent(owner.agentId, usdc(30));
  const foreign = await buildAgent();
  const plain = await newKey(owner.apiKey, { name: "plain" });
  const revoked = await newKey(owner.apiKey, { name: "revoked" });
  const asker = await newKey(owner.apiKey, { name: "asker", approval_above_usdc: 0.01 });
  expect((await api("POST", `/api/keys/${revoked.id}/revoke`, { key: owner.apiKey, body: {} })).status).toBe(
    200,
  );
  keys = { owner: owner.apiKey, foreign: foreign.apiKey, revoked: revoked.key, plain: plain.key };

  const free = await buildListing({ endpointUrl: seller.url });
  const paid = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: otherSeller.agentId });
  const ran = await api("POST", "/api/execute", { key: owner.apiKey, body: { task: free.slug, input: {} } });
  ids.invocation = ran.body.invocation_id;
  ids.receipt = ran.body.receipt_id;
  ids.quote = (
    await api("POST", "/api/quotes", { key: owner.apiKey, body: { listing_id: paid.id } })
  ).body.quote_id;
  const held = await api("POST", `/api/invoke/${paid.id}`, { key: asker.key, body: { input: {} } });
  expect(held.status).toBe(202);
  ids.approval = held.body.approval_id;
  ids.askerKey = asker.id;
  const published = await api("POST", "/api/capabilities", {
    key: owner.apiKey,
    body: {
      name: `BOLA listing ${randomBytes(3).toString("hex")}`,
      description: "owned by the matrix's owner",
      category: "devtools",
      endpoint_url: seller.url,
      pricing_model: "per_call",
      price_per_unit: 0,
      input_schema: { type: "object" },
      tags: ["bola"],
    },
  });
  expect(published.status, JSON.stringify(published.body)).toBe(201);
  ids.listing = published.body.id;
  const [deposit] = await db()("deposits")
    .insert({
      agent_id: owner.agentId,
      chain_id: 31337,
      tx_hash: `0x${randomBytes(32).toString("hex")}`,
      sender_address: `0x${"11".repeat(20)}`,
      platform_address: `0x${"22".repeat(20)}`,
      token_address: `0x${"33".repeat(20)}`,
      confirmations_required: 1,
      not_found_deadline_at: new Date(Date.now() + 3600_000),
    })
    .returning("id");
  ids.deposit = deposit.id;
  const order = await api("POST", "/api/verification/orders", {
    key: owner.apiKey,
    body: { target: `${seller.url}/probe`, protocol: "http-json" },
  });
  expect(order.status, JSON.stringify(order.body)).toBe(202);
  ids.order = order.body.order_id;
  overrideConfig({ verificationMinIntervalSeconds: 60 });
  const monitoring = await api("POST", `/api/verification/orders/${ids.order}/monitoring`, {
    key: owner.apiKey,
    body: { interval: 3600 },
  });
  expect(monitoring.status, JSON.stringify(monitoring.body)).toBe(201);
  ids.subscription = monitoring.body.subscription_id;
  const connector = await api("POST", "/api/connectors", {
    key: owner.apiKey,
    body: {
      connector_type: "trading_connector",
      mcp_server_name: "trading-connector",
      endpoint: `${seller.url}/mcp`,
    },
  });
  expect(connector.status, JSON.stringify(connector.body)).toBe(201);
  ids.connector = connector.body.connector_id;
  for (const [name, value] of Object.entries(ids)) expect(value, name).toEqual(expect.any(String));
});

afterAll(async () => {
  await seller?.close();
  await service?.stop();
  await chain?.stop();
});

type Who = keyof Keys | "none";
interface Row {
  /** "GET /api/execute/status/{invocation}" — {name} is replaced by ids[name]. */
  route: string;
  body?: Record<string, unknown>;
  /** Expected status per caller; the owner's last, since a mutation may consume the thing. */
  expect: Record<Who, number>;
  /** For mutations: reads the thing back, to show a refused call changed nothing. */
  unchanged?: () => Promise<unknown>;
}

const READ = { foreign: 404, revoked: 401, none: 401 } as const;

const MATRIX: Row[] = [
  { route: "GET /api/execute/status/{invocation}", expect: { ...READ, plain: 200, owner: 200 } },
  { route: "GET /api/commerce/receipts/{receipt}", expect: { ...READ, plain: 200, owner: 200 } },
  { route: "GET /api/quotes/{quote}", expect: { ...READ, plain: 200, owner: 200 } },
  { route: "GET /api/wallet/deposits/{deposit}", expect: { ...READ, plain: 200, owner: 200 } },
  // Supervisors see every approval of their agent; other keys only the ones they asked for.
  { route: "GET /api/approvals/{approval}", expect: { ...READ, plain: 404, owner: 200 } },
  {
    route: "POST /api/approvals/{approval}/approve",
    body: {},
    expect: { ...READ, plain: 403, owner: 200 },
    unchanged: async () => (await db()("approvals").where({ id: ids.approval }).first()).status,
  },
  {
    route: "POST /api/keys/{askerKey}/rotate",
    body: {},
    expect: { ...READ, plain: 403, owner: 200 },
    unchanged: async () => {
      const row = await db()("api_keys").where({ id: ids.askerKey }).first();
      return [row.key_hash ?? row.hash, row.revoked_at];
    },
  },
  {
    route: "PATCH /api/capabilities/{listing}",
    body: { description: "changed by someone" },
    expect: { foreign: 404, revoked: 401, none: 401, plain: 200, owner: 200 },
    unchanged: async () => (await db()("listings").where({ id: ids.listing }).first()).description,
  },
  {
    route: "POST /api/keys/{askerKey}/revoke",
    body: {},
    expect: { ...READ, plain: 403, owner: 200 },
    unchanged: async () => (await db()("api_keys").where({ id: ids.askerKey }).first()).revoked_at,
  },
  { route: "GET /api/verification/orders/{order}", expect: { ...READ, plain: 200, owner: 200 } },
  { route: "GET /api/connectors/{connector}", expect: { ...READ, plain: 200, owner: 200 } },
  {
    route: "POST /api/verification/orders/{order}/rerun",
    body: {},
    expect: { ...READ, plain: 202, owner: 202 },
    unchanged: async () =>
      (await db()("verification_orders").where({ rerun_of: ids.order }).count({ n: "*" }))[0]!.n,
  },
  {
    route: "POST /api/verification/orders/{order}/monitoring",
    body: { interval: 7200 },
    expect: { ...READ, plain: 201, owner: 201 },
    unchanged: async () =>
      (await db()("monitoring_subscriptions").where({ order_id: ids.order }).count({ n: "*" }))[0]!.n,
  },
  {
    route: "POST /api/verification/monitoring/{subscription}/cancel",
    body: {},
    expect: { ...READ, plain: 200, owner: 200 },
    unchanged: async () =>
      (await db()("monitoring_subscriptions").where({ id: ids.subscription }).first()).status,
  },
  {
    route: "POST /api/connectors/{connector}/disable",
    body: {},
    expect: { ...READ, plain: 200, owner: 200 },
    unchanged: async () => (await db()("connectors").where({ id: ids.connector }).first()).status,
  },
  {
    route: "DELETE /api/capabilities/{listing}",
    expect: { foreign: 404, revoked: 401, none: 401, plain: 200, owner: 200 },
    unchanged: async () => (await db()("listings").where({ id: ids.listing }).first()).status,
  },
];

async function call(row: Row, who: Who): Promise<ApiResponse> {
  const [method, template] = row.route.split(" ") as [string, string];
  const path = template.replace(/\{(\w+)\}/g, (_, name: keyof typeof ids) => ids[name]);
  return api(method, path, { key: who === "none" ? undefined : keys[who], body: row.body });
}

describe("the authorization matrix", () => {
  it("another agent, a revoked key, a key without the power and no key each get the documented answer", async () => {
    const problems: string[] = [];
    // Refusals first (they must change nothing), then the plain key and the owner (who may change it).
    const order: Who[] = ["foreign", "revoked", "none", "plain", "owner"];
    for (const row of MATRIX) {
      for (const who of order) {
        const before =
          row.unchanged && who !== "plain" && who !== "owner" ? await row.unchanged() : undefined;
        const res = await call(row, who);
        if (res.status !== row.expect[who])
          problems.push(
            `${row.route} as ${who}: ${res.status} (expected ${row.expect[who]}) ${res.text.slice(0, 160)}`,
          );
        if (res.status >= 400) {
          if (res.body?.success !== false)
            problems.push(`${row.route} as ${who}: refusal outside the envelope`);
          // Never the thing's data: a refusal names no id of the owner's that the caller did not send.
          if (res.text.includes(owner.agentId))
            problems.push(`${row.route} as ${who}: refusal leaks the owner's id`);
        }
        if (row.unchanged && before !== undefined && res.status >= 400) {
          const after = await row.unchanged();
          if (JSON.stringify(after) !== JSON.stringify(before))
            problems.push(`${row.route} as ${who}: refused, yet the row changed`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it("another agent's thing reads exactly like an unknown id", async () => {
    const unknown = "00000000-0000-4000-8000-000000000000";
    for (const template of [
      "/api/verification/orders/{id}",
      "/api/connectors/{id}",
      "/api/execute/status/{id}",
      "/api/commerce/receipts/{id}",
      "/api/quotes/{id}",
      "/api/wallet/deposits/{id}",
      "/api/approvals/{id}",
    ]) {
      const mine = template.includes("orders")
        ? ids.order
        : template.includes("connectors")
          ? ids.connector
          : template.includes("status")
            ? ids.invocation
            : template.includes("receipts")
              ? ids.receipt
              : template.includes("quotes")
                ? ids.quote
                : template.includes("deposits")
                  ? ids.deposit
                  : ids.approval;
      const theirs = await api("GET", template.replace("{id}", mine), { key: keys.foreign });
      const none = await api("GET", template.replace("{id}", unknown), { key: keys.foreign });
      expect([theirs.status, theirs.body.error.code], template).toEqual([none.status, none.body.error.code]);
      expect(theirs.body.error.message.replace(mine, "ID"), template).toBe(
        none.body.error.message.replace(unknown, "ID"),
      );
    }
  });

  it("admin routes refuse every agent key, and answer the admin key", async () => {
    for (const [method, path] of [
      ["GET", "/api/admin/custody"],
      ["POST", "/api/admin/custody/freeze"],
      ["POST", "/api/admin/custody/unfreeze"],
    ] as const) {
      for (const key of [keys.owner, keys.plain, keys.foreign, undefined]) {
        const res = await api(method, path, {
          key,
          body: method === "POST" ? { reason: "bola" } : undefined,
        });
        expect(res.status, `${method} ${path}`).toBe(401);
      }
    }
    const custody = await db()("platform_settings").first();
    expect((await api("GET", "/api/admin/custody", { key: ADMIN_KEY })).status).toBe(200);
    expect(await db()("platform_settings").first()).toEqual(custody);
  });
});
