import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";

// Loopback fakes of the providers' real wire formats (from their public docs), for adapter and API tests.

export interface FakeRequest {
  method: string;
  url: URL;
  headers: IncomingMessage["headers"];
  body: any;
}

export interface FakeProvider {
  base: string;
  requests: FakeRequest[];
  /** Replaces how the next requests are answered. */
  answer: (req: FakeRequest, res: ServerResponse) => void;
  close(): Promise<void>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

export async function startFakeProvider(answer: FakeProvider["answer"]): Promise<FakeProvider> {
  const requests: FakeRequest[] = [];
  const fake = { base: "", requests, answer } as FakeProvider;
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const request = {
      method: req.method ?? "GET",
      url: new URL(req.url ?? "/", "http://fake"),
      headers: req.headers,
      body: text ? JSON.parse(text) : undefined,
    };
    requests.push(request);
    fake.answer(request, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  fake.close = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return fake;
}

/** A SearXNG /search?format=json answer (docs/dev/search_api.rst). */
export function searxngAnswer(query: string, n: number) {
  return {
    query,
    number_of_results: n,
    results: Array.from({ length: n }, (_, i) => ({
      url: `https://site${i}.example/page`,
      title: `Result <b>${i}</b> for ${query}`,
      content: `Snippet ${i} &amp; more ${"text ".repeat(200)}`,
      engine: "duckduckgo",
      engines: ["duckduckgo"],
      score: 1 / (i + 1),
      category: "general",
      ...(i === 0 ? { publishedDate: "2026-11-01T00:00:00" } : {}),
    })),
    answers: [],
    corrections: [],
    infoboxes: [],
    suggestions: [],
    unresponsive_engines: [],
  };
}

/** A Brave Search /res/v1/web/search answer (api-dashboard.search.brave.com). */
export function braveAnswer(query: string, n: number) {
  return {
    type: "search",
    query: { original: query, more_results_available: true },
    mixed: { type: "mixed", main: [] },
    web: {
      type: "search",
      family_friendly: true,
      results: Array.from({ length: n }, (_, i) => ({
        type: "search_result",
        title: `Brave ${i}`,
        url: i === 1 ? "javascript:alert(1)" : `https://brave${i}.example/`,
        is_source_local: false,
        description: `The <strong>answer</strong> number ${i}`,
        age: i === 0 ? "November 1, 2026" : undefined,
        language: "en",
        profile: { name: "Example", url: `https://brave${i}.example/` },
      })),
    },
  };
}

/** An OpenAI-compatible chat.completion whose message content is `content`. */
export function completion(content: string, finish = "stop", extra: Record<string, unknown> = {}) {
  return {
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1_790_000_000,
    model: "test-model",
    choices: [
      { index: 0, message: { role: "assistant", content, refusal: null, ...extra }, finish_reason: finish },
    ],
    usage: { prompt_tokens: 100, completion_tokens: 200, total_tokens: 300 },
  };
}

export const GOOD_BRIEF = {
  executive_summary: "Solid-state batteries trade manufacturing difficulty for energy density and safety.",
  key_findings: [
    { finding: "Energy density gains of 20-50% are claimed.", source_urls: ["https://example.org/ssb"] },
    { finding: "Dendrite formation remains a challenge.", source_urls: [] },
  ],
  analysis: "Adoption depends on cost curves and yield improvements in electrolyte production.",
  caveats: ["Knowledge may be dated."],
  next_steps: ["Check recent pilot-line announcements."],
};

/** A Firecrawl v2 /v2/scrape answer (apps/api/openapi.json). */
export function firecrawlAnswer(url: string) {
  return {
    success: true,
    data: {
      markdown: `# Hello\n\n${"word ".repeat(3000)}`,
      html: "<h1>Hello</h1>",
      links: ["https://a.example/", "mailto:x@example.com", "https://b.example/"],
      metadata: {
        title: "Hello page",
        description: "d",
        language: "en",
        sourceURL: url,
        url,
        statusCode: 200,
      },
    },
  };
}
