import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { toNodeHandler } from "@modelcontextprotocol/node";
import { createMcpHandler, fromJsonSchema, McpServer } from "@modelcontextprotocol/server";
import { encodePaymentRequiredHeader } from "@x402/core/http";
import { type FacilitatorClient, x402ResourceServer } from "@x402/core/server";
import type { SupportedResponse } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/server";

// The seller endpoints a verification probe meets, each a real server on loopback built the way a seller
// would build it: an x402 resource server with the official @x402/core server and @x402/evm's exact
// scheme, and an MCP server with the official SDK (@modelcontextprotocol/server + /node). Each records
// what it received, so tests can assert what the prober sent (and never sent).

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface TargetServer {
  url: string;
  received: Received[];
  close(): Promise<void>;
}

async function listen(
  handle: (
    req: Received,
    res: import("node:http").ServerResponse,
    raw: import("node:http").IncomingMessage,
  ) => unknown,
  path: string,
): Promise<TargetServer> {
  const received: Received[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const r = {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      headers: req.headers,
      body: Buffer.concat(chunks).toString("utf8"),
    };
    received.push(r);
    try {
      await handle(r, res, req);
    } catch (error) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(error));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}${path}`,
    received,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A JSON endpoint: answers every request with `status` and `body` (or a raw string body). */
export function startJsonTarget(status: number, body: unknown, contentType = "application/json") {
  return listen((_r, res) => {
    res.writeHead(status, { "content-type": contentType });
    res.end(typeof body === "string" ? body : JSON.stringify(body));
  }, "/api/answer?token=secret-query");
}

export const X402_NETWORK = "eip155:8453" as const;
export const X402_ASSET = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" as const;
export const X402_PAY_TO = "0x1111111111111111111111111111111111111111" as const;

/**
 * An x402 v2 resource server (official packages): every unpaid request gets 402 with PAYMENT-REQUIRED.
 * Its facilitator counts verify/settle calls: a probe that paid would make them non-zero.
 */
export async function startX402Target(): Promise<TargetServer & { facilitatorCalls: () => number }> {
  let facilitatorCalls = 0;
  const facilitator: FacilitatorClient = {
    verify: async () => {
      facilitatorCalls++;
      throw new Error("this test resource server never accepts payment");
    },
    settle: async () => {
      facilitatorCalls++;
      throw new Error("this test resource server never settles");
    },
    getSupported: async () =>
      ({
        kinds: [{ x402Version: 2, scheme: "exact", network: X402_NETWORK }],
        extensions: [],
        signers: {},
      }) as unknown as SupportedResponse,
  };
  const resourceServer = new x402ResourceServer(facilitator).register(X402_NETWORK, new ExactEvmScheme());
  await resourceServer.initialize();
  const target = await listen(async (r, res) => {
    if (r.headers["payment-signature"] || r.headers["x-payment"]) facilitatorCalls++;
    const requirements = await resourceServer.buildPaymentRequirements({
      scheme: "exact",
      network: X402_NETWORK,
      payTo: X402_PAY_TO,
      price: { asset: X402_ASSET, amount: "10000", extra: { name: "USD Coin", version: "2" } },
      maxTimeoutSeconds: 60,
    });
    const required = await resourceServer.createPaymentRequiredResponse(requirements, {
      url: `http://127.0.0.1${r.path}`,
      description: "a paid test resource",
      mimeType: "application/json",
    });
    res.writeHead(402, {
      "content-type": "application/json",
      "payment-required": encodePaymentRequiredHeader(required),
    });
    res.end("{}");
  }, "/paid/resource");
  return { ...target, facilitatorCalls: () => facilitatorCalls };
}

/**
 * An MCP server (official SDK, Streamable HTTP, JSON responses) with two tools that count their calls.
 * With `requireBearer` it answers 401 to any request without Authorization, as a connector that needs an
 * account connection does.
 */
export async function startMcpTarget(
  options: { requireBearer?: boolean; tools?: string[] } = {},
): Promise<TargetServer & { toolCalls: () => number }> {
  let toolCalls = 0;
  const build = () => {
    const server = new McpServer(
      { name: "test-seller-mcp", version: "1.2.3" },
      { capabilities: { tools: {} } },
    );
    for (const name of options.tools ?? ["get_quote", "place_order"]) {
      server.registerTool(
        name,
        { description: `test tool ${name}`, inputSchema: fromJsonSchema({ type: "object" } as never) },
        (async () => {
          toolCalls++;
          return { content: [{ type: "text", text: "called" }] };
        }) as never,
      );
    }
    return server;
  };
  const handler = toNodeHandler(createMcpHandler(() => build(), { responseMode: "json" }));
  const target = await listen(async (r, res, req) => {
    if (options.requireBearer && !r.headers.authorization) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" });
      res.end(JSON.stringify({ error: "connect an account first" }));
      return;
    }
    if (r.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    await handler(req, res, r.body ? JSON.parse(r.body) : undefined);
  }, "/mcp");
  return { ...target, toolCalls: () => toolCalls };
}
