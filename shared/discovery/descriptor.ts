import { LANES, type LiveFacts, SERVICE_NAME, SERVICE_SUMMARY, SERVICE_VERSION } from "./facts.js";
import { entryLinks } from "./llms.js";
import { type DiscoverySources, hasRoute, urlOf } from "./sources.js";

// /.well-known/agent-marketplace.json (our service descriptor) and /api/discovery (what an agent needs
// to choose how to talk to us: protocols, networks, auth, tools, lanes, entry points).

function protocols(facts: LiveFacts) {
  return [
    {
      name: "api-key-ledger",
      description:
        "API key (Bearer amk_…) and a prepaid USDC balance; the price is held, captured on success",
      paid_execution: facts.paidExecution.enabled,
    },
    {
      name: "x402",
      version: 2,
      description:
        "HTTP 402 challenge, EIP-3009 USDC authorization on the retry (PAYMENT-SIGNATURE), no registration",
      paid_execution: facts.paidExecution.enabled,
    },
    {
      name: "mpp",
      description: "the same challenge as WWW-Authenticate: Payment, paid with Authorization: Payment",
      paid_execution: facts.paidExecution.enabled,
    },
  ];
}

function networks(facts: LiveFacts) {
  return [
    {
      network: facts.network,
      chain_id: facts.chainId,
      name: facts.chainName,
      asset: { symbol: "USDC", address: facts.usdc, decimals: 6 },
    },
  ];
}

/** Every GET entry point the guides link, with a media type. */
function entryPoints(sources: DiscoverySources) {
  const links = entryLinks(sources);
  return [...links.start, ...links.services, ...links.payments, ...links.discovery, ...links.optional].map(
    ([name, url]) => ({ name, url, method: "GET" }),
  );
}

export function marketplaceDescriptor(sources: DiscoverySources, facts: LiveFacts) {
  const u = (path: string) => urlOf(sources, path);
  return {
    schema: "agentmarket.agent-marketplace.v1",
    name: SERVICE_NAME,
    version: SERVICE_VERSION,
    platform_id: facts.platformId,
    description: SERVICE_SUMMARY,
    base_url: sources.baseUrl,
    entry_points: {
      register: { method: "POST", url: u("/api/quickstart") },
      execute: { method: "POST", url: u("/api/execute") },
      match: { method: "GET", url: u("/api/execute/match") },
      market: u("/market.json"),
      catalog: u("/api/catalog"),
      discovery: u("/api/discovery"),
      index: u("/api/index.json"),
      openapi: u("/openapi.json"),
      x402: u("/.well-known/x402/service.json"),
      agent_card: u("/.well-known/agent-card.json"),
      verification: hasRoute(sources, "get", "/api/verification") ? u("/api/verification") : null,
      mcp: sources.mcp ? u("/mcp") : null,
      mcp_null_reason: sources.mcp ? null : "mcp_transport_not_served",
    },
    payment_protocols: protocols(facts).map((p) => p.name),
    networks: networks(facts),
    fee_rate: facts.feeRate,
    split: { seller: 1 - facts.feeRate, platform: facts.feeRate },
    paid_execution: facts.paidExecution,
    signing: { jwks_url: facts.jwksUrl, algorithms: ["EdDSA"], curve: "Ed25519" },
    documentation: {
      llms: u("/llms.txt"),
      llms_full: u("/llms-full.txt"),
      agents: u("/agents.txt"),
      skill: u("/skill.md"),
      public_proof: u("/public-proof.json"),
    },
  };
}

export function discoveryDocument(sources: DiscoverySources, facts: LiveFacts) {
  return {
    schema: "agentmarket.discovery.v1",
    base_url: sources.baseUrl,
    protocols: protocols(facts),
    networks: networks(facts),
    auth_schemes: [
      {
        name: "bearer",
        header: "Authorization: Bearer <api_key>",
        key_prefix: "amk_",
        obtain: { method: "POST", url: urlOf(sources, "/api/quickstart") },
      },
      { name: "x402", header: "PAYMENT-SIGNATURE (also X-PAYMENT)", obtain: null },
      { name: "mpp", header: "Authorization: Payment", obtain: null },
    ],
    tools: facts.tools.map((t) => ({ ...t, url: urlOf(sources, t.path) })),
    lanes: Object.entries(LANES).map(([name, description]) => ({ name, description })),
    entry_points: entryPoints(sources),
    mcp: sources.mcp ? { url: urlOf(sources, "/mcp"), transport: "streamable-http" } : null,
    mcp_null_reason: sources.mcp ? null : "mcp_transport_not_served",
  };
}
