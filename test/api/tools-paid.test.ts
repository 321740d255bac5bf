import { createServer, type Server } from "node:http";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import type { Worker } from "bullmq";
import type { Address } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type Config, getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import { getQueue } from "../../shared/queues.js";
import { activeSigningKey, signMessage } from "../../shared/routing/request-signing.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { fundedAgent, MONEY_TABLES, rowCounts, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";
import { usdcBalance, x402Buyer } from "../helpers/x402.js";
import {
  completion,
  type FakeProvider,
  GOOD_BRIEF,
  searxngAnswer,
  sendJson,
  startFakeProvider,
} from "../tools/fake-providers.js";

// A paid call per tool with exact ledger effects (issue #16 points 1 and 7), on a live rail (local
// chain): keyed invoke and execute by task alias hold, call the tool's endpoint signed, capture the price
// — a first-party listing books seller share and fee to platform revenue — and receipt it; a provider
// failure releases the hold; bad input is refused before any hold; the x402 edge and the sandbox reach
// the same endpoints; the endpoints refuse anything but the platform's signed call.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platform: Address;
let service: TestService;
let settlements: Worker;
let search: FakeProvider;
let model: FakeProvider;
let pages: Server;
let pagesBase: string;
let original: Config;
const ids: Record<string, string> = {};

const revenue = async () => (await platformAccount("platform_revenue", "USDC")).balance_micros;
const base = () => `http://127.0.0.1:${getConfig().port}`;

beforeAll(async () => {
  ownDb = await useOwnDatabase("toolspaid");
  chain = await startLocalChain();
  platform = (await usePaidChain(chain)).address;
  search = await startFakeProvider((req, res) =>
    sendJson(res, 200, searxngAnswer(req.url.searchParams.get("q") ?? "", 3)),
  );
  model = await startFakeProvider((_req, res) => sendJson(res, 200, completion(JSON.stringify(GOOD_BRIEF))));
  pages = createServer((req, res) => {
    if (req.url === "/to-private") {
      res.writeHead(302, { location: "http://10.9.8.7/" });
      return res.end();
    }
    res.writeHead(200, { "content-type": "text/html" });
    res.end(
      `<html><head><title>Local page</title></head><body><article><h1>Heading</h1><p>${"Body text of the local page. ".repeat(40)}</p></article></body></html>`,
    );
  });
  await new Promise<void>((resolve) => pages.listen(0, "127.0.0.1", resolve));
  pagesBase = `http://127.0.0.1:${(pages.address() as { port: number }).port}`;
  overrideConfig({
    scrapeProvider: "builtin",
    searchProvider: "searxng",
    searxngBaseUrl: search.base,
    researchBaseUrl: model.base,
    researchModel: "test-model",
  });
  original = getConfig();
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  for (const row of await db()("listings").whereNotNull("tool_id").select("id", "tool_id"))
    ids[row.tool_id] = row.id;
});

afterAll(async () => {
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await service?.stop();
  await search?.close();
  await model?.close();
  pages?.closeAllConnections();
  await new Promise((resolve) => pages?.close(resolve));
  await chain?.stop();
  await ownDb?.drop();
});

afterEach(() => {
  overrideConfig(original);
});

const CASES = [
  [
    "document_parse",
    20_000n,
    { format: "csv", content: "a,b\n1,x\n2,y\n" },
    {
      format: "csv",
      rows: [
        [1, "x"],
        [2, "y"],
      ],
    },
  ],
  [
    "page_scrape",
    20_000n,
    () => ({ url: `${pagesBase}/article`, formats: ["markdown", "links"] }),
    { title: "Local page", provider: "builtin" },
  ],
  [
    "web_search",
    10_000n,
    { query: "rust ownership", max_results: 2 },
    { provider: "searxng", query: "rust ownership" },
  ],
  [
    "research_brief",
    500_000n,
    { query: "What limits solid-state batteries?" },
    { executive_summary: GOOD_BRIEF.executive_summary, method: { browsed_web: false } },
  ],
] as const;

describe("a paid call per tool (keyed invoke)", () => {
  it.each(CASES)(
    "%s: holds, calls, captures %s micro-USDC to platform revenue, receipts it",
    async (tool, price, rawInput, expected) => {
      const input = typeof rawInput === "function" ? rawInput() : rawInput;
      const buyer = await fundedAgent(1);
      const revenueBefore = await revenue();
      const res = await api("POST", `/api/invoke/${ids[tool]}`, { key: buyer.apiKey, body: { input } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.success).toBe(true);
      expect(res.body.output).toMatchObject(expected);
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1) - price, held: 0n });
      // seller_id is null: the 97% share and the 3% fee both land in platform revenue.
      expect((await revenue()) - revenueBefore).toBe(price);
      const receipt = await api("GET", `/api/commerce/receipts/${res.body.receipt_id}`, {
        key: buyer.apiKey,
      });
      const fee = (price * 3n) / 100n;
      expect(receipt.body).toMatchObject({
        amount_usdc: (Number(price) / 1e6).toFixed(6),
        split: {
          seller_share_usdc: (Number(price - fee) / 1e6).toFixed(6),
          platform_fee_usdc: (Number(fee) / 1e6).toFixed(6),
        },
        settlement: { state: "captured", rail: "ledger" },
      });
    },
  );

  it("execute by task alias routes 'parse' to the document-parse listing and charges 0.02", async () => {
    const buyer = await fundedAgent(1);
    const res = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      body: { task: "parse", input: { format: "markdown", content: "# Title\n\ntext\n" } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.provider.listing_id).toBe(ids.document_parse);
    expect(res.body.output.toc).toEqual([{ depth: 1, text: "Title", slug: "title" }]);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.98), held: 0n });
  });
});

describe("failures are never charged", () => {
  it("a provider failure (search answers 500) releases the hold: 502, nothing charged, no receipt", async () => {
    search.answer = (_req, res) => sendJson(res, 500, { error: "down" });
    try {
      const buyer = await fundedAgent(1);
      const revenueBefore = await revenue();
      const res = await api("POST", `/api/invoke/${ids.web_search}`, {
        key: buyer.apiKey,
        body: { input: { query: "x" } },
      });
      expect(res.status).toBe(502);
      expect(errorCode(res)).toBe("PROVIDER_FAILED");
      expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });
      expect(await revenue()).toBe(revenueBefore);
      const status = await api("GET", `/api/execute/status/${res.body.error.details.invocation_id}`, {
        key: buyer.apiKey,
      });
      expect(status.body).toMatchObject({
        status: "failed",
        receipt_id: null,
        settlement: { state: "released" },
      });
    } finally {
      search.answer = (req, res) => sendJson(res, 200, searxngAnswer(req.url.searchParams.get("q") ?? "", 3));
    }
  });

  it("a scrape whose redirect reaches a private address fails at fetch time and releases the hold", async () => {
    const buyer = await fundedAgent(1);
    const res = await api("POST", `/api/invoke/${ids.page_scrape}`, {
      key: buyer.apiKey,
      body: { input: { url: `${pagesBase}/to-private` } },
    });
    expect(res.status).toBe(502);
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(1), held: 0n });
  });

  it.each([
    ["a private scrape url", "page_scrape", { url: "http://192.168.0.10/" }, "/input/url"],
    [
      "max_length out of range",
      "page_scrape",
      { url: "https://example.com/", max_length: 999 },
      "/input/max_length",
    ],
    [
      "a PDF as content_base64",
      "document_parse",
      { format: "csv", content_base64: Buffer.from("%PDF-1.7").toString("base64") },
      "/input/content_base64",
    ],
    [
      "both content and content_base64",
      "document_parse",
      { format: "csv", content: "a", content_base64: "YQ==" },
      "/input",
    ],
    ["a research query under 10 characters", "research_brief", { query: "short" }, "/input/query"],
    ["11 search results", "web_search", { query: "q", max_results: 11 }, "/input/max_results"],
  ])("%s → 400 before any hold, nothing written", async (_name, tool, input, path) => {
    const buyer = await fundedAgent(1);
    const before = await rowCounts(MONEY_TABLES);
    const res = await api("POST", `/api/invoke/${ids[tool]}`, { key: buyer.apiKey, body: { input } });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(path);
    expect(await rowCounts(MONEY_TABLES)).toEqual(before);
  });
});

describe("the other ways in", () => {
  it("the x402 edge: paid on chain, the tool runs, platform revenue takes the whole price", async () => {
    const buyer = await x402Buyer(chain, 100_000n);
    const revenueBefore = await revenue();
    const platformBefore = await usdcBalance(chain, platform);
    const res = await buyer.pay(`${base()}/api/x402/invoke/${ids.web_search}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: { query: "x402 search" } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.output).toMatchObject({ provider: "searxng", query: "x402 search" });
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(90_000n);
    expect(await usdcBalance(chain, platform)).toBe(platformBefore + 10_000n);
    expect((await revenue()) - revenueBefore).toBe(10_000n);
  });

  it("MCP: agentmarket_execute with task 'search' runs the tool and charges 0.01 from the key's balance", async () => {
    const buyer = await fundedAgent(1);
    const client = new Client(
      { name: "tools-test", version: "1.0.0" },
      { versionNegotiation: { mode: "auto" } },
    );
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base()}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${buyer.apiKey}` } },
      }),
    );
    try {
      const run = await client.callTool({
        name: "agentmarket_execute",
        arguments: { task: "search", input: { query: "mcp search", max_results: 1 } },
      });
      expect(run.isError, JSON.stringify(run.content)).toBeFalsy();
      expect(run.structuredContent).toMatchObject({
        success: true,
        provider: { listing_id: ids.web_search },
        output: {
          provider: "searxng",
          results: [expect.objectContaining({ url: "https://site0.example/page" })],
        },
      });
    } finally {
      await client.close();
    }
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: usdc(0.99), held: 0n });
  });

  it("the sandbox: match quotes the tool, execute runs it for tUSDC", async () => {
    const buyer = await buildAgent();
    expect((await api("POST", "/api/tumbler/join", { key: buyer.apiKey })).status).toBe(200);
    const quote = await api("GET", "/api/tumbler/execute/match?task=parse", { key: buyer.apiKey });
    expect(quote.status, JSON.stringify(quote.body)).toBe(200);
    const res = await api("POST", "/api/tumbler/execute", {
      key: buyer.apiKey,
      body: { quote_id: quote.body.quote_id, input: { format: "json", content: '{"a":[1,2]}' } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      output: { format: "json", value: { a: [1, 2] } },
      provider: { listing_id: ids.document_parse },
      cost: { amount_tusdc: "0.020000", charged: true, simulated: true },
    });
    expect(await balances(buyer.agentId, "tUSDC")).toMatchObject({ available: 9_980_000n, held: 0n });
  });
});

describe("the tool endpoints serve only the platform's signed calls", () => {
  const body = JSON.stringify({ input: { format: "csv", content: "a\n1\n" } });
  const post = (headers: Record<string, string>, payload = body) =>
    fetch(`${base()}/api/tools/parse`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: payload,
    });

  it("a signed call gets the output", async () => {
    const res = await post(signMessage(await activeSigningKey(), "m-ok", body));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ success: true, output: { format: "csv", rows: [[1]] } });
  });

  it.each([
    ["no signature", async () => ({})],
    [
      "a stale timestamp",
      async () => signMessage(await activeSigningKey(), "m-old", body, Math.floor(Date.now() / 1000) - 3600),
    ],
    [
      "another key's signature",
      async () => {
        const { generateSigningKey } = await import("../../shared/routing/request-signing.js");
        return signMessage(generateSigningKey().key, "m-x", body);
      },
    ],
    [
      "a signature over another body",
      async () => signMessage(await activeSigningKey(), "m-t", body.replace("1", "2")),
    ],
  ])("%s → 401 platform_signature_required", async (_name, headers) => {
    const res = await post(await headers());
    expect(res.status).toBe(401);
    const answer = (await res.json()) as { error: { code: string; details: { reason: string } } };
    expect(answer.error).toMatchObject({
      code: "UNAUTHORIZED",
      details: { reason: "platform_signature_required" },
    });
  });
});
