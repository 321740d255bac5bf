import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { researchBrief } from "../../shared/tools/research/research.js";
import { scrapePage } from "../../shared/tools/scrape/scrape.js";
import { webSearch } from "../../shared/tools/search/search.js";
import {
  braveAnswer,
  completion,
  type FakeProvider,
  firecrawlAnswer,
  GOOD_BRIEF,
  searxngAnswer,
  sendJson,
  startFakeProvider,
} from "./fake-providers.js";

// Each provider adapter against a loopback server speaking that provider's wire format: SearXNG, Brave,
// an OpenAI-compatible chat-completions backend (json_schema and json_object), Firecrawl v2.

const original = getConfig();
let fake: FakeProvider;
const SECRET = "sk-secret-provider-key-123";

beforeAll(async () => {
  fake = await startFakeProvider((_req, res) => sendJson(res, 500, {}));
});
afterAll(async () => fake.close());
afterEach(() => {
  overrideConfig(original);
  fake.requests.length = 0;
});

describe("SearXNG", () => {
  it("asks GET /search?q=&format=json and normalises up to max_results, with bounded plain snippets", async () => {
    overrideConfig({ ...original, searchProvider: "searxng", searxngBaseUrl: fake.base });
    fake.answer = (req, res) => sendJson(res, 200, searxngAnswer(req.url.searchParams.get("q") ?? "", 12));
    const { output } = await webSearch({ query: "rust ownership", max_results: 10 });
    expect(fake.requests[0]).toMatchObject({ method: "GET" });
    expect(fake.requests[0]!.url.pathname).toBe("/search");
    expect(fake.requests[0]!.url.searchParams.get("format")).toBe("json");
    expect(fake.requests[0]!.url.searchParams.get("q")).toBe("rust ownership");
    expect(output.provider).toBe("searxng");
    expect(output.results).toHaveLength(10);
    expect(output.results[0]).toEqual({
      title: "Result 0 for rust ownership",
      url: "https://site0.example/page",
      snippet: expect.stringMatching(/^Snippet 0 & more text/),
      published_at: "2026-11-01T00:00:00",
    });
    expect(output.results.every((r) => r.snippet.length <= 500)).toBe(true);
  });

  it("a 403 (json not enabled) or a body without results is the provider's failure", async () => {
    overrideConfig({ ...original, searchProvider: "searxng", searxngBaseUrl: fake.base });
    fake.answer = (_req, res) => sendJson(res, 403, { error: "forbidden" });
    await expect(webSearch({ query: "x" })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
      details: { provider_status: 403 },
    });
    fake.answer = (_req, res) => sendJson(res, 200, { nothing: true });
    await expect(webSearch({ query: "x" })).rejects.toMatchObject({ code: "PROVIDER_FAILED" });
  });
});

describe("Brave", () => {
  it("sends the key as X-Subscription-Token, count=max_results, and drops non-http(s) URLs", async () => {
    overrideConfig({ ...original, searchProvider: "brave", braveBaseUrl: fake.base, braveApiKey: SECRET });
    fake.answer = (req, res) => sendJson(res, 200, braveAnswer(req.url.searchParams.get("q") ?? "", 4));
    const { output } = await webSearch({ query: "solid state", max_results: 4 });
    const req = fake.requests[0]!;
    expect(req.url.pathname).toBe("/res/v1/web/search");
    expect(req.url.searchParams.get("count")).toBe("4");
    expect(req.headers["x-subscription-token"]).toBe(SECRET);
    expect(output.results.map((r) => r.url)).toEqual([
      "https://brave0.example/",
      "https://brave2.example/",
      "https://brave3.example/",
    ]);
    expect(output.results[0]).toMatchObject({
      snippet: "The answer number 0",
      published_at: "November 1, 2026",
    });
    expect(JSON.stringify(output)).not.toContain(SECRET);
  });

  it("answers no results when Brave has no web section; a 429 is the provider's failure without the key", async () => {
    overrideConfig({ ...original, searchProvider: "brave", braveBaseUrl: fake.base, braveApiKey: SECRET });
    fake.answer = (_req, res) => sendJson(res, 200, { type: "search", query: { original: "q" } });
    expect((await webSearch({ query: "q" })).output.results).toEqual([]);
    fake.answer = (_req, res) => sendJson(res, 429, { error: "rate" });
    const error = await webSearch({ query: "q" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "PROVIDER_FAILED" });
    expect(JSON.stringify(error) + String((error as Error).message)).not.toContain(SECRET);
  });
});

describe("research brief (OpenAI-compatible chat completions)", () => {
  const configure = (extra: Partial<ReturnType<typeof getConfig>> = {}) =>
    overrideConfig({
      ...original,
      researchBaseUrl: fake.base,
      researchModel: "test-model",
      researchApiKey: SECRET,
      ...extra,
    });
  const input = { query: "What limits solid-state batteries?", focus_areas: ["cost", "safety"] };

  it("asks json_schema strict output with bounded tokens, validates the brief and says it did not browse", async () => {
    configure();
    fake.answer = (_req, res) => sendJson(res, 200, completion(JSON.stringify(GOOD_BRIEF)));
    const { output } = await researchBrief(input);
    const req = fake.requests[0]!;
    expect(req.url.pathname).toBe("/v1/chat/completions");
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(req.body).toMatchObject({
      model: "test-model",
      max_tokens: 1500,
      stream: false,
      response_format: { type: "json_schema", json_schema: { name: "research_brief", strict: true } },
    });
    expect(req.body.response_format.json_schema.schema.required).toEqual([
      "executive_summary",
      "key_findings",
      "analysis",
      "caveats",
      "next_steps",
    ]);
    expect(req.body.messages[1].content).toContain("2. safety");
    expect(output).toMatchObject({
      ...GOOD_BRIEF,
      method: { synthesized_from: "model_knowledge", browsed_web: false },
    });
    expect(output.method.note).toMatch(/not browsed/);
    expect(JSON.stringify(output)).not.toContain(SECRET);
  });

  it("falls back to json_object with the schema in the prompt, and max_completion_tokens when told", async () => {
    configure({
      researchStructuredOutput: "json_object",
      researchTokenParam: "max_completion_tokens",
      researchMaxTokens: 800,
    });
    fake.answer = (_req, res) =>
      sendJson(res, 200, completion(`\`\`\`json\n${JSON.stringify(GOOD_BRIEF)}\n\`\`\``));
    const { output } = await researchBrief(input);
    const body = fake.requests[0]!.body;
    expect(body.response_format).toEqual({ type: "json_object" });
    expect(body.max_completion_tokens).toBe(800);
    expect(body.max_tokens).toBeUndefined();
    expect(body.messages[0].content).toContain('"executive_summary"');
    expect(output.method.structured_output).toBe("json_object");
  });

  it("retries invalid JSON once, then succeeds", async () => {
    configure();
    let n = 0;
    fake.answer = (_req, res) =>
      sendJson(res, 200, completion(n++ === 0 ? "{not json" : JSON.stringify(GOOD_BRIEF)));
    await expect(researchBrief(input)).resolves.toMatchObject({ success: true });
    expect(fake.requests).toHaveLength(2);
  });

  it.each([
    ["a truncated answer", completion('{"executive_summary": "x"', "length")],
    ["a refusal", completion("", "stop", { refusal: "I can't help with that" })],
    ["an off-schema brief", completion(JSON.stringify({ ...GOOD_BRIEF, key_findings: [] }))],
    ["no choices", { id: "x", object: "chat.completion", choices: [] }],
  ])("fails on %s (not billable), never a fake brief", async (_name, answer) => {
    configure();
    fake.answer = (_req, res) => sendJson(res, 200, answer);
    await expect(researchBrief(input)).rejects.toMatchObject({ code: "PROVIDER_FAILED" });
  });

  it("a backend error is the provider's failure and its message carries no key", async () => {
    configure();
    fake.answer = (_req, res) => sendJson(res, 401, { error: { message: `bad key ${SECRET}` } });
    const error = (await researchBrief(input).catch((e: unknown) => e)) as Error & { details: unknown };
    expect(error).toMatchObject({ code: "PROVIDER_FAILED" });
    expect(`${error.message} ${JSON.stringify(error.details)}`).not.toContain(SECRET);
  });
});

describe("Firecrawl v2", () => {
  it("POSTs /v2/scrape with the key and formats, and bounds what it answers", async () => {
    overrideConfig({
      ...original,
      scrapeProvider: "firecrawl",
      firecrawlBaseUrl: fake.base,
      firecrawlApiKey: SECRET,
    });
    fake.answer = (req, res) => sendJson(res, 200, firecrawlAnswer(req.body.url));
    const { output } = await scrapePage({
      url: "https://news.example/a",
      formats: ["markdown", "links"],
      only_main_content: false,
      max_length: 1000,
    });
    const req = fake.requests[0]!;
    expect(req.url.pathname).toBe("/v2/scrape");
    expect(req.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(req.body).toMatchObject({
      url: "https://news.example/a",
      formats: ["markdown", "links"],
      onlyMainContent: false,
    });
    expect(output).toMatchObject({
      provider: "firecrawl",
      title: "Hello page",
      final_url: "https://news.example/a",
      links: ["https://a.example/", "https://b.example/"],
      truncated: true,
    });
    expect(output.markdown!.length).toBe(1000);
    expect(JSON.stringify(output)).not.toContain(SECRET);
  });

  it("refuses a private URL before asking Firecrawl, and fails on success:false", async () => {
    overrideConfig({ ...original, scrapeProvider: "firecrawl", firecrawlBaseUrl: fake.base });
    await expect(scrapePage({ url: "http://192.168.1.1/" })).rejects.toMatchObject({
      code: "SCHEMA_VALIDATION_FAILED",
    });
    expect(fake.requests).toHaveLength(0);
    fake.answer = (_req, res) => sendJson(res, 200, { success: false, error: "blocked" });
    await expect(scrapePage({ url: "https://news.example/a" })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
    });
    fake.answer = (_req, res) => sendJson(res, 402, { error: "Payment required" });
    await expect(scrapePage({ url: "https://news.example/a" })).rejects.toMatchObject({
      code: "PROVIDER_FAILED",
    });
  });
});
