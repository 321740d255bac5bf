import { type Config, getConfig } from "../config.js";

// Which first-party tools exist and whether each may run on this deployment (docs/tools.md). A tool whose
// provider is not configured is "not available": its listing is hidden from every catalog, match and
// discovery document, and a direct call of it is refused before any hold (fail closed).

export type ToolId = "document_parse" | "page_scrape" | "web_search" | "research_brief";

export interface ToolFacts {
  id: ToolId;
  /** The listing's slug, also its first task alias. */
  slug: string;
  /** Task aliases (the listing's tags). */
  aliases: readonly string[];
  /** The provider endpoint on our own API that the executions worker calls. */
  path: string;
  priceMicros: bigint;
}

export const TOOLS: Readonly<Record<ToolId, ToolFacts>> = {
  document_parse: {
    id: "document_parse",
    slug: "document-parse",
    aliases: ["parse", "document-parse", "document_parse"],
    path: "/api/tools/parse",
    priceMicros: 20_000n,
  },
  page_scrape: {
    id: "page_scrape",
    slug: "page-scrape",
    aliases: ["scrape", "page-scrape", "page_scrape"],
    path: "/api/tools/scrape",
    priceMicros: 20_000n,
  },
  web_search: {
    id: "web_search",
    slug: "web-search",
    aliases: ["search", "web-search", "web_search"],
    path: "/api/tools/search",
    priceMicros: 10_000n,
  },
  research_brief: {
    id: "research_brief",
    slug: "research-brief",
    aliases: ["research", "research-brief", "research_brief"],
    path: "/api/tools/research",
    priceMicros: 500_000n,
  },
};

export const TOOL_IDS = Object.keys(TOOLS) as ToolId[];

export interface ToolAvailability {
  id: ToolId;
  available: boolean;
  /** Who serves it when available (builtin, firecrawl, searxng, brave, the model name…). */
  provider: string | null;
  /** Why not, when unavailable: always provider_not_configured today. */
  reason: "provider_not_configured" | null;
  /** What the operator sets to enable it (no values, never a key). */
  missing: string[];
}

function availability(id: ToolId, provider: string | null, missing: string[]): ToolAvailability {
  const available = provider !== null && missing.length === 0;
  return {
    id,
    available,
    provider: available ? provider : null,
    reason: available ? null : "provider_not_configured",
    missing,
  };
}

/** Whether one tool may run under this configuration, and what is missing when not. */
export function toolAvailability(id: ToolId, config: Config = getConfig()): ToolAvailability {
  switch (id) {
    case "document_parse":
      return availability(id, "local", []);
    case "page_scrape": {
      if (config.scrapeProvider === "off") return availability(id, null, ["SCRAPE_PROVIDER"]);
      return availability(id, config.scrapeProvider, []);
    }
    case "web_search": {
      if (config.searchProvider === "off") return availability(id, null, ["SEARCH_PROVIDER"]);
      if (config.searchProvider === "searxng")
        return availability(id, "searxng", config.searxngBaseUrl ? [] : ["SEARXNG_BASE_URL"]);
      return availability(id, "brave", config.braveApiKey ? [] : ["BRAVE_API_KEY"]);
    }
    case "research_brief": {
      const missing = [
        ...(config.researchBaseUrl ? [] : ["RESEARCH_BASE_URL"]),
        ...(config.researchModel ? [] : ["RESEARCH_MODEL"]),
      ];
      return availability(id, config.researchModel ?? null, missing);
    }
  }
}

/** True for a known tool id. */
export function isToolId(value: unknown): value is ToolId {
  return typeof value === "string" && (TOOL_IDS as string[]).includes(value);
}

/** The ids of the tools that may run now; listings of the others are hidden. */
export function availableToolIds(config: Config = getConfig()): ToolId[] {
  return TOOL_IDS.filter((id) => toolAvailability(id, config).available);
}

/**
 * Why a listing bound to a first-party tool cannot be called now, or null. Listings of no tool (every
 * third-party listing, echo) are never blocked here.
 */
export function toolBlockReason(toolId: string | null | undefined): "provider_not_configured" | null {
  if (!toolId) return null;
  if (!isToolId(toolId)) return "provider_not_configured";
  return toolAvailability(toolId).reason;
}
