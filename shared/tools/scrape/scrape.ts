import { getConfig } from "../../config.js";
import { AppError, validationError } from "../../errors.js";
import { FetchFailure, type SafeFetchResponse, safeFetch } from "../../net/safe-fetch.js";
import { checkUrlRules, UnsafeEndpoint } from "../../net/url-policy.js";
import { fitToBytes } from "../output-bound.js";
import { clip } from "../parse/bounds.js";
import { callProviderJson, httpUrl, providerFailure } from "../provider-http.js";
import { runInThread } from "../thread/run.js";
import type { Extracted } from "./extract.js";
import { SCRAPE_MAX_LINKS, type ScrapeFormat, type ScrapeInputT, type ScrapeOutputT } from "./schemas.js";

// The page-scrape tool. Built in: safe fetch (public addresses only, every redirect re-checked, time
// and size capped) → charset decode → a worker thread (SAX guard, linkedom, <base>, Readability,
// turndown). Or a Firecrawl v2 API (/v2/scrape) the operator configured, with its key kept here.

const HTML_TYPES = ["text/html", "application/xhtml+xml"];
const REDIRECTS = 5;

/** Refuses a URL the outbound boundary would refuse without DNS (loopback, private, internal names). */
export function checkScrapeUrl(raw: string): URL {
  try {
    return checkUrlRules(raw).url;
  } catch (error) {
    if (!(error instanceof UnsafeEndpoint)) throw error;
    throw urlRefused(error.message);
  }
}

function urlRefused(why: string): AppError {
  const base = validationError(`the url is not a public http(s) address: ${why}`, [
    { path: "/input/url", message: `refused: ${why}` },
  ]);
  return new AppError(base.code, base.message, { ...base.details, reason: "url_not_public" });
}

function header(response: SafeFetchResponse, name: string): string {
  const value = response.headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? "";
}

/** The page's text in its declared charset (HTTP header, else <meta charset>), UTF-8 otherwise. */
function decodePage(response: SafeFetchResponse): string {
  const fromHeader = /charset=["']?([\w-]+)/i.exec(header(response, "content-type"))?.[1];
  const head = response.body.subarray(0, 2048).toString("latin1");
  const fromMeta = /<meta[^>]+charset=["']?([\w-]+)/i.exec(head)?.[1];
  for (const label of [fromHeader, fromMeta, "utf-8"]) {
    if (!label) continue;
    try {
      return new TextDecoder(label).decode(response.body);
    } catch {
      // an unknown label: try the next one
    }
  }
  return response.body.toString("utf8");
}

async function fetchPage(url: string): Promise<SafeFetchResponse> {
  const config = getConfig();
  try {
    return await safeFetch(url, {
      method: "GET",
      headers: {
        accept: "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
        "user-agent": `${config.platformId}-scrape/1`,
      },
      timeoutMs: config.scrapeTimeoutMs,
      maxBytes: config.scrapeMaxBytes,
      maxRedirects: REDIRECTS,
    });
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    if (error.kind === "blocked") throw urlRefused(error.message.replace(/^refused \S+: /, ""));
    if (error.kind === "timeout")
      throw new AppError("TIMEOUT", "the page did not arrive in time", { reason: "page_timeout" });
    if (error.kind === "too_large")
      throw providerFailure("page", `larger than ${config.scrapeMaxBytes} bytes`, {
        reason: "page_too_large",
      });
    throw providerFailure("page", error.message, { reason: `page_${error.kind}` });
  }
}

async function builtin(
  input: ScrapeInputT,
  formats: ScrapeFormat[],
  maxLength: number,
): Promise<Extracted & { final_url: string }> {
  const started = Date.now();
  const response = await fetchPage(input.url);
  if (response.status < 200 || response.status >= 300)
    throw providerFailure("page", `answered HTTP ${response.status}`, {
      reason: "page_http_error",
      page_status: response.status,
    });
  const type = header(response, "content-type").split(";")[0]!.trim().toLowerCase();
  if (!HTML_TYPES.includes(type))
    throw providerFailure("page", `is ${type || "of no declared type"}, not HTML`, {
      reason: "page_not_html",
    });
  const extracted = await runInThread<Extracted>(
    {
      kind: "extract",
      job: {
        html: decodePage(response),
        finalUrl: response.url,
        formats,
        onlyMainContent: input.only_main_content ?? true,
        maxLength,
      },
    },
    // One budget for the whole scrape: extraction gets what the fetch left (at least a second).
    Math.max(1000, getConfig().scrapeTimeoutMs - (Date.now() - started)),
    "extract",
  );
  return { ...extracted, final_url: response.url };
}

function clipped(value: unknown, maxLength: number, out: { truncated: boolean }): string | undefined {
  if (typeof value !== "string") return undefined;
  const c = clip(value, maxLength);
  if (c.cut) out.truncated = true;
  return c.text;
}

async function firecrawl(input: ScrapeInputT, formats: ScrapeFormat[], maxLength: number) {
  const config = getConfig();
  const { json } = await callProviderJson("firecrawl", `${config.firecrawlBaseUrl}/v2/scrape`, {
    method: "POST",
    headers: config.firecrawlApiKey ? { authorization: `Bearer ${config.firecrawlApiKey}` } : {},
    body: {
      url: input.url,
      formats,
      onlyMainContent: input.only_main_content ?? true,
      timeout: config.scrapeTimeoutMs - 1000,
    },
    timeoutMs: config.scrapeTimeoutMs,
    maxBytes: 8 * 1024 * 1024,
  });
  const answer = json as { success?: unknown; data?: Record<string, unknown>; error?: unknown };
  if (answer?.success !== true || !answer.data || typeof answer.data !== "object")
    throw providerFailure("firecrawl", "reported no success");
  const data = answer.data;
  const metadata = (data.metadata ?? {}) as Record<string, unknown>;
  const out: Extracted & { final_url: string } = {
    title: typeof metadata.title === "string" ? clip(metadata.title, 500).text : null,
    truncated: false,
    main_content_found: input.only_main_content ?? true,
    final_url: httpUrl(metadata.url) ?? httpUrl(metadata.sourceURL) ?? input.url,
  };
  if (formats.includes("markdown")) out.markdown = clipped(data.markdown, maxLength, out) ?? "";
  if (formats.includes("html")) out.html = clipped(data.html, maxLength, out) ?? "";
  if (formats.includes("links")) {
    const links: string[] = [];
    let chars = 0;
    for (const raw of Array.isArray(data.links) ? data.links : []) {
      const href = httpUrl(raw);
      if (!href) continue;
      if (links.length >= SCRAPE_MAX_LINKS || chars + href.length > maxLength) {
        out.truncated = true;
        break;
      }
      chars += href.length;
      links.push(href);
    }
    out.links = links;
  }
  return out;
}

/** The page-scrape tool: the requested formats of one public page, each cut to max_length characters. */
export async function scrapePage(input: ScrapeInputT): Promise<{ success: true; output: ScrapeOutputT }> {
  checkScrapeUrl(input.url);
  const provider = getConfig().scrapeProvider === "firecrawl" ? "firecrawl" : "builtin";
  const formats = [...new Set(input.formats ?? ["markdown"])] as ScrapeFormat[];
  const maxLength = input.max_length ?? 50_000;
  const page =
    provider === "firecrawl"
      ? await firecrawl(input, formats, maxLength)
      : await builtin(input, formats, maxLength);
  const output: ScrapeOutputT = {
    url: input.url,
    final_url: page.final_url,
    title: page.title,
    ...(page.markdown !== undefined ? { markdown: page.markdown } : {}),
    ...(page.html !== undefined ? { html: page.html } : {}),
    ...(page.links !== undefined ? { links: page.links } : {}),
    truncated: page.truncated,
    main_content_found: page.main_content_found,
    provider,
  };
  return { success: true, output: fitToBytes(output, { arrays: ["links"], strings: ["html", "markdown"] }) };
}
