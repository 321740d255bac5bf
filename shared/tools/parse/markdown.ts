import GithubSlugger from "github-slugger";
import { Lexer, type Token } from "marked";
import { clip, PARSE_BOUNDS } from "./bounds.js";

export interface MarkdownBlock {
  type: string;
  text: string;
  depth?: number;
  lang?: string;
  ordered?: boolean;
  items?: number;
  rows?: number;
}

export interface MarkdownOutput {
  format: "markdown";
  title: string | null;
  toc: { depth: number; text: string; slug: string }[];
  blocks: MarkdownBlock[];
  block_count: number;
  truncated: boolean;
}

function blockOf(token: Token): MarkdownBlock | null {
  switch (token.type) {
    case "space":
    case "def":
      return null;
    case "heading":
      return { type: "heading", depth: token.depth as number, text: token.text as string };
    case "code":
      return { type: "code", lang: (token.lang as string | undefined) || "", text: token.text as string };
    case "list":
      return {
        type: "list",
        ordered: Boolean(token.ordered),
        items: (token.items as unknown[]).length,
        text: token.raw,
      };
    case "table":
      return { type: "table", rows: (token.rows as unknown[]).length, text: token.raw };
    default:
      return {
        type: token.type,
        text: "text" in token && typeof token.text === "string" ? token.text : token.raw,
      };
  }
}

/** Markdown → top-level blocks and a table of contents (GitHub-style slugs, de-duplicated). */
export function parseMarkdown(text: string): MarkdownOutput {
  const tokens = Lexer.lex(text, { gfm: true });
  const slugger = new GithubSlugger();
  const toc: MarkdownOutput["toc"] = [];
  const blocks: MarkdownBlock[] = [];
  let truncated = false;
  let budget = PARSE_BOUNDS.outputChars;
  let count = 0;
  for (const token of tokens) {
    const block = blockOf(token);
    if (!block) continue;
    count += 1;
    if (block.type === "heading") {
      if (toc.length < PARSE_BOUNDS.tocEntries) {
        const heading = clip(block.text, 300).text;
        toc.push({ depth: block.depth ?? 1, text: heading, slug: slugger.slug(heading) });
      } else truncated = true;
    }
    if (blocks.length >= PARSE_BOUNDS.markdownBlocks || budget <= 0) {
      truncated = true;
      continue;
    }
    const clipped = clip(block.text, PARSE_BOUNDS.cellChars);
    if (clipped.cut) truncated = true;
    budget -= clipped.text.length + 40;
    blocks.push({ ...block, text: clipped.text });
  }
  const first = toc.find((h) => h.depth === 1) ?? toc[0];
  return { format: "markdown", title: first?.text ?? null, toc, blocks, block_count: count, truncated };
}
