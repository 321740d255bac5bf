import { caip2 } from "../chain/client.js";
import { getConfig } from "../config.js";
import { formatUsdc } from "../kernel/money.js";
import { PLATFORM_FEE_RATE, paidGate } from "../money/index.js";
import { availableToolIds, TOOLS, type ToolId } from "../tools/index.js";
import { type DiscoverySources, hasRoute, urlOf } from "./sources.js";

// The live facts the documents share, read once per build: network, fee, paid-execution state, the
// first-party tools that run, the lanes. A tool that does not run here (no route, or a priced tool
// whose provider is not configured) is not listed.

/** The service's version, as its OpenAPI document states it. */
export const SERVICE_VERSION = "0.1.0";

export const SERVICE_NAME = "Agent Market";

export const SERVICE_SUMMARY =
  "A marketplace and task router for software agents: register with one POST, call listed services " +
  "through a router that picks a provider and falls back when one fails, pay per call in USDC (API key " +
  "and ledger, or x402 without registering), and get a receipt for every call.";

/** The discovery lanes (spec "Discovery visibility lanes"). */
export const LANES = {
  featured: "curated listings with verification or runtime proof, capped per seller",
  search: "active approved listings with verification or a successful call",
  registry: "every valid public listing that passes the safety, bond and broken-listing filters",
} as const;

export interface FirstPartyTool {
  id: string;
  name: string;
  description: string;
  method: "get" | "post";
  path: string;
  price_usdc: string;
  auth: "none" | "key";
}

const HOSTED_TOOL_TEXT: Record<ToolId, [string, string]> = {
  document_parse: [
    "Document parse",
    "CSV, JSON, Markdown or HTML → typed rows, shape stats, blocks and TOC, text and links",
  ],
  page_scrape: ["Page scrape", "one public web page as Markdown, HTML and links"],
  web_search: ["Web search", "up to 10 results with title, URL and snippet"],
  research_brief: ["Research brief", "a structured brief synthesized by a language model (no browsing)"],
};

export interface LiveFacts {
  platformId: string;
  network: string;
  chainId: number;
  chainName: string;
  usdc: string;
  feeRate: number;
  paidExecution: { enabled: boolean; reason: string | null };
  jwksUrl: string;
  tools: FirstPartyTool[];
}

/** First-party tools that are served by this deployment (their routes exist). */
function servedTools(sources: DiscoverySources): FirstPartyTool[] {
  const tools: FirstPartyTool[] = [];
  if (hasRoute(sources, "get", "/api/tools/echo")) {
    tools.push({
      id: "echo",
      name: "Echo",
      description: "Free connectivity check: answers the message it is sent",
      method: "get",
      path: "/api/tools/echo",
      price_usdc: formatUsdc(0n),
      auth: "none",
    });
  }
  if (hasRoute(sources, "get", "/api/x402/test/echo")) {
    tools.push({
      id: "x402-test-echo",
      name: "x402 edge echo",
      description: "Free check of the x402 edge (no quote, no payment), for agents without a key",
      method: "get",
      path: "/api/x402/test/echo",
      price_usdc: formatUsdc(0n),
      auth: "none",
    });
  }
  // The priced first-party tools whose provider is configured here (docs/tools.md): bought like any
  // listing, by task alias through POST /api/execute (or invoke, x402, sandbox, MCP). The others are absent.
  for (const id of availableToolIds()) {
    const [name, what] = HOSTED_TOOL_TEXT[id];
    tools.push({
      id,
      name,
      description: `${what}; POST /api/execute with task "${TOOLS[id].aliases[0]}"`,
      method: "post",
      path: "/api/execute",
      price_usdc: formatUsdc(TOOLS[id].priceMicros),
      auth: "key",
    });
  }
  return tools;
}

export async function liveFacts(sources: DiscoverySources): Promise<LiveFacts> {
  const config = getConfig();
  const gate = await paidGate();
  return {
    platformId: config.platformId,
    network: caip2(config.chainId),
    chainId: config.chainId,
    chainName: config.chainName,
    usdc: config.usdcAddress,
    feeRate: PLATFORM_FEE_RATE,
    paidExecution: { enabled: gate.enabled, reason: gate.reason },
    jwksUrl: urlOf(sources, "/.well-known/jwks.json"),
    tools: servedTools(sources),
  };
}
