import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
// A word no other test uses, so searches see only this file's listings.
const token = `zq${randomBytes(4).toString("hex")}`;
const ids: Record<string, string> = {};

beforeAll(async () => {
  service = await startService();
  const seller = await buildAgent("seller");
  const make = async (key: string, extra: Parameters<typeof buildListing>[0]) => {
    ids[key] = (await buildListing({ name: `${token} ${key}`, sellerId: seller.agentId, ...extra })).id;
  };
  const url = "http://127.0.0.1:9/invoke";
  await make("plain", { endpointUrl: url });
  await make("reachable", { endpointUrl: url, verificationStatus: "reachable" });
  await make("failed", { endpointUrl: url, verificationStatus: "failed" });
  await make("retired", { endpointUrl: url, status: "retired", verificationStatus: "verified" });
  await make("proven", { endpointUrl: url, category: "nlp" });
  await db()("listings").where({ id: ids.proven }).update({ last_success_at: db().fn.now() });
  for (let i = 0; i < 4; i++)
    await make(`featured${i}`, { endpointUrl: url, featured: true, verificationStatus: "verified" });
});
afterAll(async () => service.stop());

async function search(params: Record<string, string>) {
  const res = await api("GET", `/api/capabilities?${new URLSearchParams({ search: token, ...params })}`);
  expect(res.status).toBe(200);
  return res.body;
}

function names(page: { capabilities: { name: string }[] }): string[] {
  return page.capabilities.map((c) => c.name.replace(`${token} `, "")).sort();
}

describe("GET /api/capabilities lanes", () => {
  it("registry: every active approved listing not marked failed", async () => {
    expect(names(await search({ visibility: "registry" }))).toEqual(
      ["featured0", "featured1", "featured2", "featured3", "plain", "proven", "reachable"].sort(),
    );
  });

  it("search: registry listings with a verdict or runtime proof", async () => {
    expect(names(await search({ visibility: "search" }))).toEqual(
      ["featured0", "featured1", "featured2", "featured3", "proven", "reachable"].sort(),
    );
  });

  it("featured: curated, at most FEATURED_PER_SELLER (3) per seller", async () => {
    const page = await search({ visibility: "featured" });
    expect(names(page)).toEqual(["featured0", "featured1", "featured2"]);
    expect(page.marketplace_info.discovery_visibility).toMatchObject({
      mode: "featured",
      requested: "featured",
      curated: true,
    });
  });

  it("defaults to the registry lane and says so", async () => {
    const page = await search({});
    expect(page.marketplace_info.discovery_visibility).toMatchObject({ mode: "registry", requested: null });
  });
});

describe("GET /api/capabilities search, filters and paging", () => {
  it("finds by word prefix and filters by category", async () => {
    expect(names(await search({ search: `${token} prov` }))).toEqual(["proven"]);
    expect(names(await search({ category: "nlp" }))).toEqual(["proven"]);
  });

  it("pages with limit/offset, total and has_more", async () => {
    const first = await search({ limit: "3", offset: "0" });
    expect(first).toMatchObject({ total: 7, total_relation: "eq", limit: 3, offset: 0, has_more: true });
    expect(first.capabilities).toHaveLength(3);
    const last = await search({ limit: "3", offset: "6" });
    expect(last).toMatchObject({ total: 7, has_more: false });
    expect(last.capabilities).toHaveLength(1);
    const beyond = await search({ limit: "3", offset: "30" });
    expect(beyond).toMatchObject({ total: 7, has_more: false, capabilities: [] });
    const all = new Set(
      [
        ...first.capabilities,
        ...(await search({ limit: "3", offset: "3" })).capabilities,
        ...last.capabilities,
      ].map((c: { id: string }) => c.id),
    );
    expect(all.size).toBe(7);
  });

  it("past the match cap: total is the cap, total_relation gte, and the pages end there", async () => {
    const cap = getConfig().catalogSearchMatchCap;
    overrideConfig({ catalogSearchMatchCap: 5 });
    try {
      const first = await search({ limit: "3", offset: "0" });
      expect(first).toMatchObject({ total: 5, total_relation: "gte", has_more: true });
      const second = await search({ limit: "3", offset: "3" });
      expect(second).toMatchObject({ total: 5, total_relation: "gte", has_more: false });
      expect(second.capabilities).toHaveLength(2);
      const ids = [...first.capabilities, ...second.capabilities].map((c: { id: string }) => c.id);
      expect(new Set(ids).size).toBe(5);
      // Exactly as many as the cap: every match counted, so the total is exact.
      overrideConfig({ catalogSearchMatchCap: 7 });
      expect(await search({})).toMatchObject({ total: 7, total_relation: "eq", has_more: false });
    } finally {
      overrideConfig({ catalogSearchMatchCap: cap });
    }
  });

  it.each([
    ["limit 0", "limit=0"],
    ["limit 101", "limit=101"],
    ["negative offset", "offset=-1"],
    ["limit not a number", "limit=abc"],
    ["unknown lane", "visibility=everything"],
    ["bad category", "category=NOT%20OK"],
    ["unknown parameter", "sort=price"],
  ])("%s → 400 SCHEMA_VALIDATION_FAILED", async (_name, qs) => {
    const res = await api("GET", `/api/capabilities?${qs}`);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
  });

  it("default limit is 100", async () => {
    expect((await search({})).limit).toBe(100);
  });
});

describe("availability on a fresh install (no settlement rail)", () => {
  it("is read_only / temporarily_unavailable / platform_custody_frozen, with custody frozen", async () => {
    const page = await search({});
    expect(page.availability).toMatchObject({
      status: "read_only",
      paid_execution: "temporarily_unavailable",
      reason: "platform_custody_frozen",
      custody: { status: "frozen", authoritative: true, authority_read_ok: true },
    });
    expect(page.marketplace_info.funding).toEqual({
      status: "temporarily_unavailable",
      reason: "platform_custody_frozen",
    });
  });

  it("lists safe discovery endpoints and human entry paths that really answer", async () => {
    const { availability } = await search({});
    for (const path of [...availability.safe_discovery_endpoints, ...availability.human_entry_paths]) {
      const concrete = path.replace("{id}", ids.plain!);
      const res = await api("GET", concrete);
      expect([200], `${concrete}`).toContain(res.status);
    }
  });
});

describe("GET /api/capabilities/{id} and /market.json", () => {
  it("reads any listing, retired included; unknown or malformed ids → 404 LISTING_NOT_FOUND", async () => {
    expect((await api("GET", `/api/capabilities/${ids.retired}`)).body.status).toBe("retired");
    for (const id of ["00000000-0000-4000-8000-000000000000", "nope"]) {
      const res = await api("GET", `/api/capabilities/${id}`);
      expect(res.status).toBe(404);
      expect(errorCode(res)).toBe("LISTING_NOT_FOUND");
    }
  });

  it("market.json holds the catalog and a fresh availability block, never cached", async () => {
    const res = await api("GET", "/market.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toMatchObject({
      schema: "agentmarket.market.v1",
      availability: { status: "read_only" },
    });
    // The registry lane's first page. Not "echo is on it": other files' featured listings, kept in a
    // test database run after run, go ahead of it.
    expect(res.body.capabilities).toHaveLength(Math.min(100, res.body.total));
    expect(res.body).toMatchObject({ total_relation: "eq", has_more: res.body.total > 100 });
    const { id: echoId } = await db()("listings").where({ slug: "echo" }).first("id");
    const echo = (await api("GET", `/api/capabilities/${echoId}`)).body;
    expect(echo).toMatchObject({
      public_supply_origin: "first_party_service",
      platform_hosted: 1,
      service_tier: "free_tool",
    });
  });

  // Both answer with the document's parts written as they are (api/mount.ts sendParts), not through
  // Koa's body: the headers Koa would send must all be there, and HEAD must send none of the body.
  for (const path of ["/market.json", "/api/capabilities?visibility=registry&limit=100"]) {
    it(`${path}: the parts sent whole, with every header, and HEAD sends no body`, async () => {
      const res = await api("GET", path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(Number(res.headers.get("content-length"))).toBe(Buffer.byteLength(res.text));
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("x-request-id")).toBeTruthy();
      expect(res.text).toBe(JSON.stringify(res.body));
      const head = await fetch(`http://127.0.0.1:${getConfig().port}${path}`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(head.headers.get("content-length")).toBe(res.headers.get("content-length"));
      expect(await head.text()).toBe("");
    });
  }
});
