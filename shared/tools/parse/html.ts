import { convert } from "html-to-text";
import { DomUtils, Parser, parseDocument } from "htmlparser2";
import { clip, PARSE_BOUNDS } from "./bounds.js";

export interface HtmlOutput {
  format: "html";
  title: string | null;
  text: string;
  links: { href: string; text: string }[];
  truncated: boolean;
}

const VOID = new Set([
  "area",
  "base",
  "br",
  "col",
  "embed",
  "hr",
  "img",
  "input",
  "link",
  "meta",
  "param",
  "source",
  "track",
  "wbr",
]);

/**
 * SAX pre-scan (htmlparser2's Parser): counts depth and elements, and pauses past the limits. The answer
 * is how much of the document is safe to build a tree from: all of it, or the prefix before the limit.
 */
export function safeHtmlPrefix(html: string): { html: string; cut: boolean } {
  let depth = 0;
  let elements = 0;
  let stopAt = -1;
  const parser: Parser = new Parser(
    {
      onopentag(name) {
        elements += 1;
        if (!VOID.has(name)) depth += 1;
        if (stopAt < 0 && (depth > PARSE_BOUNDS.htmlDepth || elements > PARSE_BOUNDS.htmlElements)) {
          stopAt = parser.startIndex;
          parser.pause();
        }
      },
      onclosetag(name) {
        if (!VOID.has(name) && depth > 0) depth -= 1;
      },
    },
    { decodeEntities: false },
  );
  parser.end(html);
  return stopAt < 0 ? { html, cut: false } : { html: html.slice(0, stopAt), cut: true };
}

function usableHref(raw: string): string | null {
  const href = raw.trim();
  if (href === "" || href.startsWith("#")) return null;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(href)?.[1]?.toLowerCase();
  if (scheme && scheme !== "http" && scheme !== "https" && scheme !== "mailto") return null;
  return clip(href, 2048).text;
}

/** HTML → plain text, title and links; a document past the depth or element limit is cut first. */
export function parseHtml(input: string): HtmlOutput {
  const prefix = safeHtmlPrefix(input);
  let truncated = prefix.cut;
  const doc = parseDocument(prefix.html);
  const titleEl = DomUtils.findOne((el) => el.name === "title", doc.children, true);
  const title = titleEl
    ? clip(DomUtils.textContent(titleEl).replace(/\s+/g, " ").trim(), 500).text || null
    : null;
  const links: HtmlOutput["links"] = [];
  for (const a of DomUtils.getElementsByTagName("a", doc.children, true)) {
    const href = usableHref(a.attribs.href ?? "");
    if (!href) continue;
    if (links.length >= PARSE_BOUNDS.htmlLinks) {
      truncated = true;
      break;
    }
    links.push({ href, text: clip(DomUtils.textContent(a).replace(/\s+/g, " ").trim(), 300).text });
  }
  const text = convert(prefix.html, {
    wordwrap: false,
    limits: {
      maxDepth: PARSE_BOUNDS.htmlDepth,
      maxChildNodes: PARSE_BOUNDS.htmlElements,
      maxInputLength: 2_000_000,
      ellipsis: "",
    },
    selectors: [
      { selector: "a", options: { ignoreHref: true } },
      { selector: "img", format: "skip" },
      { selector: "head", format: "skip" },
    ],
  });
  const clipped = clip(text.trim(), PARSE_BOUNDS.textChars);
  if (clipped.cut) truncated = true;
  return { format: "html", title, text: clipped.text, links, truncated };
}
