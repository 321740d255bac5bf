import type { Next } from "koa";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import { countClientRequest } from "../../shared/identity/index.js";
import type { AppContext, RouteDef } from "../route.js";

// /mcp: the MCP transport (docs/mcp.md), Streamable HTTP, stateless, for clients of both protocol
// revisions (2025-11-25 through the SDK's stateless legacy fallback, 2026-07-28 natively). In front of
// the SDK handler, which validates nothing itself: Host and Origin checks against DNS rebinding, the API's
// body limit (the JSON body middleware already read the body) and a per-client request budget.

export const MCP_PATH = "/mcp";

/**
 * The MCP SDK (with zod and its HTTP adapter, some 350 files) and our server on it, imported on the
 * first /mcp request rather than at start-up: most processes, and most test files, never serve one.
 */
const importSdk = () =>
  Promise.all([
    import("@modelcontextprotocol/node"),
    import("@modelcontextprotocol/server"),
    import("./server.js"),
  ]);
let sdk: ReturnType<typeof importSdk> | undefined;
const loadSdk = () => (sdk ??= importSdk());

/** Hosts a browser or client may address us by: the public base URL's host and loopback names. */
function allowedHosts(): Set<string> {
  return new Set([new URL(getConfig().publicBaseUrl).hostname, "localhost", "127.0.0.1", "[::1]", "::1"]);
}

function hostnameOf(value: string): string | undefined {
  try {
    return new URL(value.includes("://") ? value : `http://${value}`).hostname;
  } catch {
    return undefined;
  }
}

export function mcpMiddleware(routes: () => RouteDef[]) {
  return async (ctx: AppContext, next: Next) => {
    if (ctx.path !== MCP_PATH) return next();
    const hosts = allowedHosts();
    const host = hostnameOf(ctx.get("host"));
    if (!host || !hosts.has(host)) {
      throw new AppError("POLICY_BLOCKED", "this Host is not served here (DNS rebinding protection)", {
        host: ctx.get("host"),
      });
    }
    const origin = ctx.get("origin");
    if (origin && !hosts.has(hostnameOf(origin) ?? "")) {
      throw new AppError("POLICY_BLOCKED", "this Origin may not call /mcp (DNS rebinding protection)", {
        origin,
      });
    }
    if (ctx.method === "POST") await countClientRequest("mcp", ctx.ip);
    const socket = ctx.req.socket;
    const address = (socket.localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
    const self = `http://${address.includes(":") ? `[${address}]` : address}:${socket.localPort}`;
    const authorization = ctx.get("authorization") || undefined;
    const [{ toNodeHandler }, { createMcpHandler }, { buildMcpServer }] = await loadSdk();
    const handler = createMcpHandler(
      ({ era }) => buildMcpServer(routes(), { era, origin: self, authorization, clientIp: ctx.ip }),
      { responseMode: "json" },
    );
    ctx.respond = false;
    await toNodeHandler(handler)(ctx.req, ctx.res, (ctx.request as { body?: unknown }).body);
  };
}
