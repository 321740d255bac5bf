import { type CallToolResult, fromJsonSchema, McpServer, ProtocolError } from "@modelcontextprotocol/server";
import { canonicalJson, parseWwwAuthenticate } from "../../shared/x402/index.js";
import type { RouteDef } from "../route.js";
import { type Forwarded, forward, toolInputSchema } from "./forward.js";
import { MCP_TOOLS, type McpTool } from "./tools.js";

// One MCP server instance per request (stateless), for either protocol era, with every tool of
// tools.ts. Paid tools speak the payment bindings of docs/mcp.md "Paid calls over MCP":
// - x402 tool-result binding (every revision): unpaid → isError with the PaymentRequired as
//   structuredContent; retry with _meta["x402/payment"] (or the payment_signature argument);
//   success carries _meta["x402/payment-response"].
// - MPP JSON-RPC binding (2025-11-25 clients only): unpaid → JSON-RPC error -32042 {httpStatus 402,
//   challenges}; retry with _meta["org.paymentauth/credential"]; success carries
//   _meta["org.paymentauth/receipt"]; a refused credential → -32043 with fresh challenges. The
//   2026-07-28 revision forbids emitting -32042, so modern clients get the x402 binding only.

export const PAYMENT_REQUIRED_CODE = -32042;
export const PAYMENT_VERIFICATION_FAILED_CODE = -32043;
const X402_PAYMENT = "x402/payment";
const X402_RESPONSE = "x402/payment-response";
const MPP_CREDENTIAL = "org.paymentauth/credential";
const MPP_RECEIPT = "org.paymentauth/receipt";

export interface McpCallContext {
  era: "legacy" | "modern";
  /** Where this service answers (the socket the MCP request came in on). */
  origin: string;
  /** The MCP request's Authorization header, sent on to keyed routes. */
  authorization?: string;
  /** The MCP client's address, so per-client limits count the client, not the loopback. */
  clientIp: string;
}

const decodeJsonHeader = (value: string | null): unknown => {
  if (!value) return undefined;
  try {
    return JSON.parse(Buffer.from(value, "base64").toString("utf8"));
  } catch {
    return undefined;
  }
};

/** MPP challenges from the 402's WWW-Authenticate, with `request` as native JSON (the MCP transport's form). */
function mppChallenges(res: Forwarded) {
  const header = res.headers.get("www-authenticate");
  const challenge = header ? parseWwwAuthenticate(header) : undefined;
  if (!challenge) return [];
  return [
    { ...challenge, request: JSON.parse(Buffer.from(challenge.request, "base64url").toString("utf8")) },
  ];
}

/** The credential of the MCP transport, as the HTTP edge takes it (Authorization: Payment …). */
function mppAuthorization(credential: unknown): string | undefined {
  if (!credential || typeof credential !== "object") return undefined;
  const c = credential as { challenge?: { request?: unknown } };
  if (!c.challenge) return undefined;
  const request =
    typeof c.challenge.request === "string"
      ? c.challenge.request
      : Buffer.from(canonicalJson(c.challenge.request)).toString("base64url");
  const echoed = { ...c, challenge: { ...c.challenge, request } };
  return `Payment ${Buffer.from(JSON.stringify(echoed)).toString("base64url")}`;
}

const text = (value: unknown) => JSON.stringify(value, null, 2);

function errorResult(res: Forwarded): CallToolResult {
  const envelope = res.body as { error?: { code?: string; message?: string } } | undefined;
  const code = envelope?.error?.code ?? `HTTP_${res.status}`;
  const message = envelope?.error?.message ?? "the call failed";
  return {
    isError: true,
    content: [{ type: "text", text: `${code}: ${message}\n${text(res.body)}` }],
    ...(res.body && typeof res.body === "object"
      ? { structuredContent: res.body as Record<string, unknown> }
      : {}),
  };
}

async function callTool(
  tool: McpTool,
  route: RouteDef,
  args: Record<string, unknown>,
  meta: Record<string, unknown> | undefined,
  call: McpCallContext,
): Promise<CallToolResult> {
  const headers: Record<string, string> = { "x-forwarded-for": call.clientIp };
  if (tool.keyed && call.authorization) headers.authorization = call.authorization;
  const mppCredential = meta?.[MPP_CREDENTIAL];
  if (tool.paid) {
    if (meta?.[X402_PAYMENT]) {
      headers["payment-signature"] = Buffer.from(JSON.stringify(meta[X402_PAYMENT])).toString("base64");
    } else if (typeof args.payment_signature === "string") {
      headers["payment-signature"] = args.payment_signature;
    } else if (mppCredential) {
      const authorization = mppAuthorization(mppCredential);
      if (!authorization) throw new ProtocolError(-32602, "malformed org.paymentauth/credential", {});
      headers.authorization = authorization;
    }
  }
  const res = await forward(call.origin, route, args, headers);
  if (res.status === 402 && tool.paid) {
    const paymentRequired = decodeJsonHeader(res.headers.get("payment-required")) as
      | Record<string, unknown>
      | undefined;
    if (call.era === "legacy" && !meta?.[X402_PAYMENT] && typeof args.payment_signature !== "string") {
      const code = mppCredential ? PAYMENT_VERIFICATION_FAILED_CODE : PAYMENT_REQUIRED_CODE;
      throw new ProtocolError(code, "Payment Required", {
        httpStatus: 402,
        challenges: mppChallenges(res),
        ...(paymentRequired ? { x402: paymentRequired } : {}),
        problem: res.body,
      });
    }
    const required = paymentRequired ?? (res.body as Record<string, unknown>);
    return { isError: true, structuredContent: required, content: [{ type: "text", text: text(required) }] };
  }
  if (res.status >= 400) return errorResult(res);
  const result: CallToolResult = {
    content: [{ type: "text", text: text(res.body) }],
    ...(res.body && typeof res.body === "object"
      ? { structuredContent: res.body as Record<string, unknown> }
      : {}),
  };
  if (tool.paid) {
    const settle = decodeJsonHeader(res.headers.get("payment-response"));
    const receipt = res.headers.get("payment-receipt");
    result._meta = {
      ...(settle ? { [X402_RESPONSE]: settle } : {}),
      ...(receipt ? { [MPP_RECEIPT]: JSON.parse(Buffer.from(receipt, "base64url").toString("utf8")) } : {}),
    };
  }
  return result;
}

/** A server with every tool, for one request of one era. */
export function buildMcpServer(routes: RouteDef[], call: McpCallContext): McpServer {
  const server = new McpServer(
    { name: "agent-market", version: "0.1.0" },
    { capabilities: { tools: {}, experimental: { payment: { methods: ["evm"] } } } },
  );
  for (const tool of MCP_TOOLS) {
    const route = routes.find((r) => r.method === tool.method && r.path === tool.path);
    if (!route) continue;
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: fromJsonSchema(toolInputSchema(route, tool) as never),
        annotations: tool.annotations,
      },
      (async (args: Record<string, unknown>, ctx: { mcpReq: { _meta?: Record<string, unknown> } }) =>
        callTool(tool, route, args ?? {}, ctx.mcpReq._meta, call)) as never,
    );
  }
  return server;
}
