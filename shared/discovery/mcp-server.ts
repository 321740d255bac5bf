import { SERVICE_NAME, SERVICE_VERSION } from "./facts.js";
import { type DiscoverySources, urlOf } from "./sources.js";
import { MCP_SERVER_SCHEMA_URL } from "./standards/mcp-server-json.js";

// /.well-known/mcp/server.json: an MCP registry server.json (2025-12-11) for our Streamable HTTP
// transport at /mcp. Served only where the transport is mounted (a document must not point at nothing).

/** `namespace/name` from our host, reverse-DNS style (market.example.com → com.example.market). */
export function registryName(baseUrl: string): string {
  const host = new URL(baseUrl).hostname;
  const namespace = /^[0-9.]+$/.test(host) ? host : host.split(".").reverse().join(".");
  return `${namespace.replace(/[^a-zA-Z0-9.-]/g, "-")}/agent-market`;
}

export function mcpServerJson(sources: DiscoverySources) {
  return {
    $schema: MCP_SERVER_SCHEMA_URL,
    name: registryName(sources.baseUrl),
    title: SERVICE_NAME,
    description: "Find, call and pay for agent services: catalog, router execute, receipts, x402 payments",
    version: SERVICE_VERSION,
    websiteUrl: sources.baseUrl,
    remotes: [
      {
        type: "streamable-http",
        url: urlOf(sources, "/mcp"),
        headers: [
          {
            name: "Authorization",
            description:
              "Bearer API key for the keyed tools (POST /api/quickstart creates one); anonymous tools need none",
            isRequired: false,
            isSecret: true,
            value: "Bearer {api_key}",
            variables: {
              api_key: { description: "an amk_ API key", isRequired: true, isSecret: true },
            },
          },
        ],
      },
    ],
  };
}
