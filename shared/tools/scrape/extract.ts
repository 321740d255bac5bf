import { Readability } from "@mozilla/readability";
import { parseHTML } from "linkedom";
import TurndownService from "turndown";
import { clip } from "../parse/bounds.js";
import { safeHtmlPrefix } from "../parse/html.js";
import { SCRAPE_MAX_LINKS, type ScrapeFormat } from "./schemas.js";

/** What the built-in scraper extracts from a fetched page (a worker thread's job). */
export interface ExtractJob {
  html: string;
  finalUrl: string;
  formats: ScrapeFormat[];
  onlyMainContent: boolean;
  maxLength: number;
}

export interface Extracted {
  title: string | null;
  markdown?: string;
  html?: string;
  links?: string[];
  truncated: boolean;
  main_content_found: boolean;
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
}

/**
 * Page → the requested formats: SAX guard (depth and element limits), linkedom, a <base> with the
 * final URL (a linkedom document has none, and Readability resolves links against it), Readability
 * for the main content, turndown for Markdown. Each format is cut to maxLength characters.
 */
export function extractPage(job: ExtractJob): Extracted {
  const guarded = safeHtmlPrefix(job.html);
  let truncated = guarded.cut;
  const { document } = parseHTML(guarded.html);
  const head = document.head ?? document.documentElement;
  const base = document.createElement("base");
  base.setAttribute("href", escapeAttribute(job.finalUrl));
  for (const old of document.querySelectorAll("base")) old.remove();
  head?.prepend(base);

  const pageTitle = document.querySelector("title")?.textContent?.replace(/\s+/g, " ").trim() || null;
  const links = job.formats.includes("links")
    ? collectLinks(document, job.finalUrl, job.maxLength)
    : undefined;
  if (links?.cut) truncated = true;

  let contentHtml: string;
  let title = pageTitle;
  let mainFound = false;
  if (job.onlyMainContent) {
    // Readability mutates the document: links were read above.
    const article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0], {
      charThreshold: 200,
    }).parse();
    if (article?.content) {
      mainFound = true;
      contentHtml = article.content;
      title = article.title?.trim() || pageTitle;
    } else {
      contentHtml = document.body?.innerHTML ?? "";
    }
  } else {
    for (const el of document.querySelectorAll("script, style, noscript, template")) el.remove();
    contentHtml = document.body?.innerHTML ?? "";
  }

  const out: Extracted = {
    title: title ? clip(title, 500).text : null,
    truncated,
    main_content_found: mainFound,
  };
  if (job.formats.includes("markdown")) {
    const turndown = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced" });
    turndown.remove(["script", "style", "noscript"]);
    const markdown = clip(turndown.turndown(contentHtml).trim(), job.maxLength);
    out.markdown = markdown.text;
    if (markdown.cut) out.truncated = true;
  }
  if (job.formats.includes("html")) {
    const html = clip(contentHtml.trim(), job.maxLength);
    out.html = html.text;
    if (html.cut) out.truncated = true;
  }
  if (links) out.links = links.links;
  return out;
}

function collectLinks(
  document: { querySelectorAll(s: string): Iterable<{ getAttribute(n: string): string | null }> },
  base: string,
  maxLength: number,
) {
  const links: string[] = [];
  const seen = new Set<string>();
  let chars = 0;
  let cut = false;
  for (const a of document.querySelectorAll("a[href]")) {
    let url: URL;
    try {
      url = new URL(a.getAttribute("href") ?? "", base);
    } catch {
      continue;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") continue;
    url.hash = "";
    const href = url.href;
    if (seen.has(href)) continue;
    if (links.length >= SCRAPE_MAX_LINKS || chars + href.length > maxLength) {
      cut = true;
      break;
    }
    seen.add(href);
    chars += href.length;
    links.push(href);
  }
  return { links, cut };
}
