import { AppError } from "../errors.js";
import { parseDocument } from "./parse/parse.js";
import { isToolId, type ToolId, toolAvailability } from "./registry.js";
import { researchBrief } from "./research/research.js";
import { checkScrapeUrl, scrapePage } from "./scrape/scrape.js";
import { webSearch } from "./search/search.js";

/** Refuses a call of a tool whose provider is not configured (503, reason provider_not_configured). */
export function requireToolAvailable(id: ToolId): void {
  const state = toolAvailability(id);
  if (state.available) return;
  throw new AppError("PROVIDER_UNAVAILABLE", `the ${id} tool has no provider configured on this deployment`, {
    reason: "provider_not_configured",
    tool: id,
    missing: state.missing,
  });
}

/**
 * The checks of a tool's input that the listing's JSON Schema cannot express, run before any money is
 * held: a scrape url naming a loopback, private or internal host (no DNS asked; the fetch re-checks
 * every hop) → 400 SCHEMA_VALIDATION_FAILED. Listings of no tool pass.
 */
export function checkToolInput(toolId: string | null | undefined, input: unknown): void {
  if (!isToolId(toolId)) return;
  if (toolId === "page_scrape") {
    const url = (input as { url?: unknown } | null)?.url;
    if (typeof url === "string") checkScrapeUrl(url);
  }
}

export const runParse = parseDocument;
export const runScrape = scrapePage;
export const runSearch = webSearch;
export const runResearch = researchBrief;
