import { getConfig } from "../../config.js";
import { clip } from "../parse/bounds.js";
import { callProviderJson, httpUrl, plainText, providerFailure } from "../provider-http.js";
import { type SearchInputT, type SearchOutputT, type SearchResultT, SNIPPET_MAX_CHARS } from "./schemas.js";

// Web search adapters, each normalised to {title, url, snippet, published_at}: SearXNG's JSON API
// (GET {base}/search?q=&format=json) and the Brave Search API (GET {base}/res/v1/web/search with
// X-Subscription-Token). Chosen by SEARCH_PROVIDER.

function normalise(title: unknown, url: unknown, snippet: unknown, published: unknown): SearchResultT | null {
  const href = httpUrl(url);
  if (!href) return null;
  return {
    title: clip(plainText(title) || href, 300).text,
    url: href,
    snippet: clip(plainText(snippet), SNIPPET_MAX_CHARS).text,
    published_at: typeof published === "string" && published.trim() !== "" ? published.slice(0, 64) : null,
  };
}

function resultsOf(
  items: unknown,
  pick: (item: Record<string, unknown>) => SearchResultT | null,
  max: number,
) {
  if (!Array.isArray(items)) return null;
  const out: SearchResultT[] = [];
  const seen = new Set<string>();
  for (const item of items) {
    if (out.length >= max) break;
    if (item === null || typeof item !== "object") continue;
    const result = pick(item as Record<string, unknown>);
    if (result && !seen.has(result.url)) {
      seen.add(result.url);
      out.push(result);
    }
  }
  return out;
}

async function searxng(query: string, max: number): Promise<SearchResultT[]> {
  const config = getConfig();
  const url = new URL(`${config.searxngBaseUrl}/search`);
  url.searchParams.set("q", query);
  url.searchParams.set("format", "json");
  url.searchParams.set("safesearch", "1");
  const { json } = await callProviderJson("searxng", url.href, {
    method: "GET",
    headers: {},
    timeoutMs: config.searchTimeoutMs,
  });
  const results = resultsOf(
    (json as { results?: unknown })?.results,
    (r) => normalise(r.title, r.url, r.content, r.publishedDate),
    max,
  );
  if (!results) throw providerFailure("searxng", "answered without a results array");
  return results;
}

async function brave(query: string, max: number): Promise<SearchResultT[]> {
  const config = getConfig();
  const url = new URL(`${config.braveBaseUrl}/res/v1/web/search`);
  url.searchParams.set("q", query);
  url.searchParams.set("count", String(max));
  const { json } = await callProviderJson("brave", url.href, {
    method: "GET",
    headers: { "x-subscription-token": config.braveApiKey ?? "" },
    timeoutMs: config.searchTimeoutMs,
  });
  const web = (json as { web?: { results?: unknown } })?.web;
  // A query with no web results has no "web" member at all.
  const results =
    web === undefined
      ? []
      : resultsOf(web.results, (r) => normalise(r.title, r.url, r.description, r.page_age ?? r.age), max);
  if (!results) throw providerFailure("brave", "answered without web.results");
  return results;
}

/** The web-search tool: up to max_results (1–10) normalised results from the configured provider. */
export async function webSearch(input: SearchInputT): Promise<{ success: true; output: SearchOutputT }> {
  const provider = getConfig().searchProvider;
  const max = input.max_results ?? 5;
  const query = input.query.trim();
  const results = provider === "brave" ? await brave(query, max) : await searxng(query, max);
  return { success: true, output: { query, provider, results } };
}
