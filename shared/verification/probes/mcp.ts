import { getConfig } from "../../config.js";
import { FetchFailure, safeFetch } from "../../net/safe-fetch.js";
import type { ProbeCheck } from "../store/orders.js";
import { PROBER_VERSION } from "../terms.js";
import type { ProbeResult, ProbeTarget } from "./types.js";

// The MCP probe (docs/verification.md "Verdicts"), also the connector probe: the official MCP client
// (@modelcontextprotocol/client) runs initialize and tools/list, and nothing else — it never calls a
// tool, never sends credentials and never connects an account. Its HTTP goes through the safe-fetch
// boundary (below); `reachable` when both requests succeed, `failed` otherwise.

const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** Headers the probe never sends, whatever the client would add. */
const NEVER_SENT = new Set(["authorization", "cookie", "proxy-authorization"]);

/** What the last HTTP answer said, so a refusal (401/403) can be told apart from an unreachable server. */
interface Observed {
  lastStatus: number | null;
  requests: number;
}

/**
 * A fetch for the MCP client made of safe fetch: POST only (the JSON-RPC requests). The client's optional
 * standalone GET stream and session DELETE are answered 405 locally, as a server without them would.
 */
function boundaryFetch(observed: Observed) {
  const config = getConfig();
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const method = (init?.method ?? "GET").toUpperCase();
    if (method !== "POST") return new Response(null, { status: 405 });
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((value, name) => {
      if (!NEVER_SENT.has(name)) headers[name] = value;
    });
    headers["user-agent"] = PROBER_VERSION;
    observed.requests++;
    const response = await safeFetch(String(url), {
      method: "POST",
      headers,
      body: typeof init?.body === "string" ? init.body : init?.body ? String(init.body) : "",
      timeoutMs: config.verificationProbeTimeoutMs,
      maxBytes: config.verificationProbeMaxBytes,
    });
    observed.lastStatus = response.status;
    const out = new Headers();
    for (const [name, value] of Object.entries(response.headers)) {
      if (value !== undefined) out.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    return new Response(NULL_BODY.has(response.status) ? null : new Uint8Array(response.body), {
      status: response.status,
      headers: out,
    });
  };
}

export interface McpListing {
  initialized: boolean;
  toolsListed: boolean;
  tools: string[];
  server: { name: string; version: string } | null;
  protocolVersion: string | null;
  lastStatus: number | null;
  error: string | null;
}

/** initialize + tools/list with the official client; never throws for the target's failures. */
export async function listMcpTools(url: string): Promise<McpListing> {
  // The client (with zod, some 300 files) loads with the first MCP probe, not with every process.
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  const observed: Observed = { lastStatus: null, requests: 0 };
  const client = new Client({ name: PROBER_VERSION.split("/")[0]!, version: PROBER_VERSION.split("/")[1]! });
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: boundaryFetch(observed) });
  const result: McpListing = {
    initialized: false,
    toolsListed: false,
    tools: [],
    server: null,
    protocolVersion: null,
    lastStatus: null,
    error: null,
  };
  try {
    await client.connect(transport);
    result.initialized = true;
    const info = client.getServerVersion();
    result.server = info ? { name: info.name, version: info.version } : null;
    result.protocolVersion = (transport as { protocolVersion?: string }).protocolVersion ?? null;
    const listed = await client.listTools();
    result.toolsListed = true;
    result.tools = listed.tools.map((t) => t.name);
  } catch (error) {
    result.error =
      error instanceof FetchFailure ? `${error.kind}: ${error.message}` : (error as Error).message;
  } finally {
    await client.close().catch(() => {});
  }
  result.lastStatus = observed.lastStatus;
  return result;
}

export async function probeMcp(target: ProbeTarget): Promise<ProbeResult> {
  const listing = await listMcpTools(target.url);
  const checks: ProbeCheck[] = [
    {
      name: "initialize",
      passed: listing.initialized,
      observation: {
        server: listing.server,
        protocol_version: listing.protocolVersion,
        ...(listing.initialized ? {} : { error: listing.error, last_status: listing.lastStatus }),
      },
    },
    {
      name: "tools_list",
      passed: listing.toolsListed,
      observation: listing.toolsListed
        ? { tool_count: listing.tools.length, tools: listing.tools.slice(0, 50) }
        : { error: listing.initialized ? listing.error : "not attempted: initialize failed" },
    },
    { name: "no_tool_called", passed: true, observation: { tools_called: 0, credentials_sent: false } },
  ];
  return { verdict: listing.initialized && listing.toolsListed ? "reachable" : "failed", checks };
}
