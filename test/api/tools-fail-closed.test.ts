import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Config, getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";

// The fail-closed matrix (issue #16 point 6): a provider-gated tool whose provider is not configured is
// absent from every catalog, lane, match and discovery read, and a direct call of its listing is refused
// with 422 LISTING_NOT_INVOCABLE reason provider_not_configured before any hold. Configured, it is back.
// A live paid rail (local chain) so the x402 edge answers its catalog reads; a database of its own.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let buyer: TestAgent;
let original: Config;
const listingIds: Record<string, string> = {};

const CONFIGURED: Partial<Config> = {
  scrapeProvider: "builtin",
  searchProvider: "searxng",
  searxngBaseUrl: "http://127.0.0.1:9",
  researchBaseUrl: "http://127.0.0.1:9",
  researchModel: "test-model",
};
const OFF: Partial<Config> = {
  scrapeProvider: "off",
  searchProvider: "off",
  searxngBaseUrl: undefined,
  researchBaseUrl: undefined,
  researchModel: undefined,
};
const GATED = [
  ["page-scrape", "scrape", { url: "https://example.com/" }],
  ["web-search", "search", { query: "rust" }],
  ["research-brief", "research", { query: "What limits solid-state batteries?" }],
] as const;

beforeAll(async () => {
  ownDb = await useOwnDatabase("toolsgate");
  chain = await startLocalChain();
  await usePaidChain(chain);
  // Discovery documents are served from a snapshot: rebuild it on every read, so a config change shows.
  overrideConfig({ discoveryCacheSeconds: 0 });
  original = getConfig();
  service = await startService({ worker: false, sweeper: false });
  buyer = await buildAgent();
  for (const row of await db()("listings").whereNotNull("tool_id").select("id", "slug"))
    listingIds[row.slug] = row.id;
  // Runtime proof (a successful call) puts a listing in the search lane too: this database is ours.
  await db()("listings").whereNotNull("tool_id").update({ last_success_at: db().fn.now() });
});
afterAll(async () => {
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});
afterEach(() => {
  overrideConfig(original);
});

/** Every slug a read mentions (the JSON text of the answer: records, pages, documents). */
async function mentions(path: string, key?: string): Promise<string> {
  const res = await api("GET", path, key ? { key } : {});
  expect(res.status, path).toBeLessThan(500);
  return typeof res.body === "string" ? res.body : JSON.stringify(res.body);
}

async function everyRead(slug: string, task: string): Promise<Record<string, boolean>> {
  const id = listingIds[slug]!;
  const seen = async (path: string, key?: string) => {
    const text = await mentions(path, key);
    return text.includes(id) || text.includes(`"${slug}"`);
  };
  return {
    registry: await seen(`/api/capabilities?visibility=registry&search=${task}`),
    search_lane: await seen(`/api/capabilities?visibility=search&search=${task}`),
    featured: await seen("/api/capabilities?visibility=featured"),
    catalog: await seen(`/api/catalog?lane=registry&limit=100`),
    market: await seen("/market.json"),
    match: await seen(`/api/execute/match?task=${task}`, buyer.apiKey),
    x402_listings: await seen("/api/x402/listings?limit=100"),
    x402_match: await seen(`/api/x402/execute/match?task=${task}`),
    x402_discover: await seen("/api/x402/discover?limit=100"),
    sandbox_match: await seen(`/api/tumbler/execute/match?task=${task}`, buyer.apiKey),
    // Discovery documents name a tool by its id (descriptor tools, agent-card skills).
    discovery: (await mentions("/api/discovery")).includes(`"${slug.replace("-", "_")}"`),
    agent_card: (await mentions("/.well-known/agent-card.json")).includes(`tool-${slug.replace("-", "_")}`),
  };
}

describe("the seeded tool listings", () => {
  it("exist once each, hosted by the platform, priced 0.02 / 0.02 / 0.01 / 0.50 USDC", async () => {
    const rows = await db()("listings").whereNotNull("tool_id").orderBy("tool_id");
    expect(
      rows.map((r) => [
        r.tool_id,
        r.slug,
        r.endpoint_url,
        String(r.price_micros),
        r.platform_hosted,
        r.seller_id,
      ]),
    ).toEqual([
      ["document_parse", "document-parse", "/api/tools/parse", "20000", true, null],
      ["page_scrape", "page-scrape", "/api/tools/scrape", "20000", true, null],
      ["research_brief", "research-brief", "/api/tools/research", "500000", true, null],
      ["web_search", "web-search", "/api/tools/search", "10000", true, null],
    ]);
  });
});

describe("a provider-gated tool without its provider", () => {
  it.each(GATED)("%s is absent from every catalog, lane, match and discovery read", async (slug, task) => {
    overrideConfig({ ...original, ...OFF });
    const reads = await everyRead(slug, task);
    expect(Object.entries(reads).filter(([, seen]) => seen)).toEqual([]);
  });

  it.each(GATED)(
    "%s is back in the registry lane, match and x402 listings once configured",
    async (slug, task) => {
      overrideConfig({ ...original, ...CONFIGURED });
      const reads = await everyRead(slug, task);
      // Every read shows it again; featured is curated (no tool is featured), so it is the one exception.
      expect(reads).toEqual({
        registry: true,
        search_lane: true,
        featured: false,
        catalog: true,
        market: true,
        match: true,
        x402_listings: true,
        x402_match: true,
        x402_discover: true,
        sandbox_match: true,
        discovery: true,
        agent_card: true,
      });
    },
  );

  it.each(GATED)(
    "a direct invoke of %s answers 422 provider_not_configured before any hold",
    async (slug, _task, input) => {
      overrideConfig({ ...original, ...OFF });
      const id = listingIds[slug]!;
      const invocationsBefore = Number(
        (await db()("invocations").where({ listing_id: id }).count({ n: "*" }))[0]!.n,
      );
      const res = await api("POST", `/api/invoke/${id}`, { key: buyer.apiKey, body: { input } });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(errorCode(res)).toBe("LISTING_NOT_INVOCABLE");
      expect(res.body.error.details.reason).toBe("provider_not_configured");
      const x402 = await api("POST", `/api/x402/invoke/${id}`, { body: { input } });
      expect(x402.status).toBe(422);
      expect(x402.body.error.details.reason).toBe("provider_not_configured");
      const quote = await api("POST", "/api/quotes", { key: buyer.apiKey, body: { listing_id: id } });
      expect(quote.status).toBe(422);
      const after = Number((await db()("invocations").where({ listing_id: id }).count({ n: "*" }))[0]!.n);
      expect(after).toBe(invocationsBefore);
    },
  );

  it("execute by task alias finds no provider rather than a fake result", async () => {
    overrideConfig({ ...original, ...OFF });
    const res = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "research", input: { query: "What limits solid-state batteries?" } },
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(res.body)).not.toContain(listingIds["research-brief"]!);
  });

  it("document parse needs no provider: listed with every provider off", async () => {
    overrideConfig({ ...original, ...OFF });
    const reads = await everyRead("document-parse", "parse");
    expect(reads).toMatchObject({ registry: true, match: true, x402_listings: true });
  });

  it("the tool endpoint itself answers 503 provider_not_configured to a signed call (a race with the config)", async () => {
    overrideConfig({ ...original, ...OFF });
    const { activeSigningKey, signMessage } = await import("../../shared/routing/request-signing.js");
    const body = JSON.stringify({ input: { query: "rust" } });
    const headers = signMessage(await activeSigningKey(), "msg-1", body);
    const res = await fetch(`${service.baseUrl}/api/tools/search`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
    });
    const answer = (await res.json()) as {
      error: { code: string; details: { reason: string; missing: string[] } };
    };
    expect(res.status).toBe(503);
    expect(answer.error).toMatchObject({
      code: "PROVIDER_UNAVAILABLE",
      details: { reason: "provider_not_configured", missing: ["SEARCH_PROVIDER"] },
    });
  });
});
