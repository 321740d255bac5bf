import { type CallToolResult, fromJsonSchema, McpServer, ProtocolError } from "@modelcontextprotocol/server";
import type { ValidateFunction } from "ajv";
import { createAjv, violationsOf } from "../../shared/kernel/json-schema.js";
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
//   _meta["org.paymentauth/receipt"]; a refused credential → -32043 with the challenges again and the
//   refusal in `problem`. The 2026-07-28 revision forbids emitting -32042, so modern clients get the x402
//   binding only.

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

/** A payment the MCP request carries, as the HTTP edge takes it, and the quote it pays when it names one. */
interface Presented {
  headers: Record<string, string>;
  quoteId?: string;
  mpp: boolean;
}

const quoteOfX402 = (payload: unknown): string | undefined =>
  (payload as { accepted?: { extra?: { quote_id?: unknown } } } | undefined)?.accepted?.extra?.quote_id as
    | string
    | undefined;

function presentedPayment(
  args: Record<string, unknown>,
  meta: Record<string, unknown> | undefined,
): Presented | undefined {
  if (meta?.[X402_PAYMENT]) {
    const payload = meta[X402_PAYMENT];
    return {
      headers: { "payment-signature": Buffer.from(JSON.stringify(payload)).toString("base64") },
      quoteId: quoteOfX402(payload),
      mpp: false,
    };
  }
  if (typeof args.payment_signature === "string") {
    return {
      headers: { "payment-signature": args.payment_signature },
      quoteId: quoteOfX402(decodeJsonHeader(args.payment_signature)),
      mpp: false,
    };
  }
  const credential = meta?.[MPP_CREDENTIAL];
  if (credential) {
    const authorization = mppAuthorization(credential);
    if (!authorization) throw new ProtocolError(-32602, "malformed org.paymentauth/credential", {});
    const request = (credential as { challenge: { request: unknown } }).challenge.request;
    const native =
      typeof request === "string"
        ? decodeJsonHeader(Buffer.from(request, "base64url").toString("base64"))
        : request;
    return {
      headers: { authorization },
      quoteId: (native as { externalId?: string } | undefined)?.externalId,
      mpp: true,
    };
  }
  return undefined;
}

/** A 402 of the edge as the MCP client's binding has it: -32042/-32043 (2025 clients) or the x402 result. */
function paymentRequired(
  res: Forwarded,
  call: McpCallContext,
  presented: Presented | undefined,
  note?: string,
): CallToolResult {
  const required = decodeJsonHeader(res.headers.get("payment-required")) as
    | Record<string, unknown>
    | undefined;
  if (call.era === "legacy" && (!presented || presented.mpp)) {
    throw new ProtocolError(
      presented ? PAYMENT_VERIFICATION_FAILED_CODE : PAYMENT_REQUIRED_CODE,
      "Payment Required",
      {
        httpStatus: 402,
        challenges: mppChallenges(res),
        ...(required ? { x402: required } : {}),
        problem: res.body,
        ...(note ? { note } : {}),
      },
    );
  }
  const body = required ?? (res.body as Record<string, unknown>);
  return {
    isError: true,
    structuredContent: body,
    content: [{ type: "text", text: `${note ? `${note}\n` : ""}${text(body)}` }],
  };
}

function success(res: Forwarded, paid: boolean): CallToolResult {
  const result: CallToolResult = {
    content: [{ type: "text", text: text(res.body) }],
    ...(res.body && typeof res.body === "object"
      ? { structuredContent: res.body as Record<string, unknown> }
      : {}),
  };
  if (paid) {
    const settle = decodeJsonHeader(res.headers.get("payment-response"));
    const receipt = res.headers.get("payment-receipt");
    result._meta = {
      ...(settle ? { [X402_RESPONSE]: settle } : {}),
      ...(receipt ? { [MPP_RECEIPT]: JSON.parse(Buffer.from(receipt, "base64url").toString("utf8")) } : {}),
    };
  }
  return result;
}

/** One call at the x402 edge: the result, or the payment it needs in the client's binding. */
async function atEdge(
  route: RouteDef,
  args: Record<string, unknown>,
  presented: Presented | undefined,
  call: McpCallContext,
  note?: string,
): Promise<CallToolResult> {
  const headers = { "x-forwarded-for": call.clientIp, ...(presented?.headers ?? {}) };
  const res = await forward(call.origin, route, args, headers);
  if (res.status === 402) return paymentRequired(res, call, presented, note);
  return res.status >= 400 ? errorResult(res) : success(res, true);
}

const BRIDGE_NOTE =
  "Your balance cannot pay this call; it can be paid with x402 instead: retry the same tool call with the payment.";

/** The edge's way to serve a keyed execute or invoke (docs/mcp.md "The bridge"), or undefined when it has none. */
async function bridgeToEdge(
  tool: McpTool,
  args: Record<string, unknown>,
  presented: Presented | undefined,
  call: McpCallContext,
  routes: RouteDef[],
): Promise<CallToolResult | undefined> {
  const find = (method: string, path: string) => routes.find((r) => r.method === method && r.path === path)!;
  const input = args.input ?? {};
  if (tool.bridge === "invoke") {
    return atEdge(
      find("post", "/api/x402/invoke/{listing_id}"),
      { listing_id: args.listing_id, input },
      presented,
      call,
      BRIDGE_NOTE,
    );
  }
  let quoteId = presented?.quoteId;
  if (!quoteId) {
    if (presented) return undefined;
    const match = await forward(
      call.origin,
      find("get", "/api/x402/execute/match"),
      { task: args.task },
      {
        "x-forwarded-for": call.clientIp,
      },
    );
    quoteId = (match.body as { quote_id?: string | null } | undefined)?.quote_id ?? undefined;
    if (match.status !== 200 || !quoteId) return undefined;
  }
  return atEdge(
    find("post", "/api/x402/execute"),
    { quote_id: quoteId, input },
    presented,
    call,
    BRIDGE_NOTE,
  );
}

async function callTool(
  tool: McpTool,
  route: RouteDef,
  args: Record<string, unknown>,
  meta: Record<string, unknown> | undefined,
  call: McpCallContext,
  routes: RouteDef[],
): Promise<CallToolResult> {
  const presented = tool.paid || tool.bridge ? presentedPayment(args, meta) : undefined;
  if (tool.paid) return atEdge(route, args, presented, call);
  // A bridged call that carries a payment is the retry of an edge challenge: it is paid at the edge.
  if (tool.bridge && presented) {
    return (
      (await bridgeToEdge(tool, args, presented, call, routes)) ?? {
        isError: true,
        content: [{ type: "text", text: "QUOTE_NOT_USABLE: the payment names no quote of this service" }],
      }
    );
  }
  const headers: Record<string, string> = { "x-forwarded-for": call.clientIp };
  if (tool.keyed && call.authorization) headers.authorization = call.authorization;
  const res = await forward(call.origin, route, args, headers);
  const code = (res.body as { error?: { code?: string } } | undefined)?.error?.code;
  if (tool.bridge && res.status === 402 && code === "PAYMENT_REQUIRED") {
    // A challenge for a 2025 client is thrown (-32042) and must reach it; any other failure of the bridge
    // leaves the route's own answer.
    const bridged = await bridgeToEdge(tool, args, undefined, call, routes).catch((error: unknown) => {
      if (error instanceof ProtocolError) throw error;
      return undefined;
    });
    return bridged ?? errorResult(res);
  }
  return res.status >= 400 ? errorResult(res) : success(res, false);
}

/** A server with every tool, for one request of one era. */
const ajv = createAjv();
const validators = new Map<string, ValidateFunction>();

/** The tool's arguments checked against its input schema (compiled once per tool), as the SDK would. */
function argumentProblems(tool: McpTool, schema: Record<string, unknown>, args: unknown): string | undefined {
  let validate = validators.get(tool.name);
  if (!validate) {
    validate = ajv.compile(schema);
    validators.set(tool.name, validate);
  }
  if (validate(args)) return undefined;
  return violationsOf(validate.errors)
    .map((v) => `${v.path} ${v.message}`)
    .join("; ");
}

export function buildMcpServer(routes: RouteDef[], call: McpCallContext): McpServer {
  const server = new McpServer(
    { name: "agent-market", version: "0.1.0" },
    { capabilities: { tools: {}, experimental: { payment: { methods: ["evm"] } } } },
  );
  const served = new Map<string, { tool: McpTool; route: RouteDef; schema: Record<string, unknown> }>();
  for (const tool of MCP_TOOLS) {
    const route = routes.find((r) => r.method === tool.method && r.path === tool.path);
    if (!route) continue;
    const schema = toolInputSchema(route, tool);
    served.set(tool.name, { tool, route, schema });
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: fromJsonSchema(schema as never),
        annotations: tool.annotations,
      },
      // Never called: tools/call is answered below; registering gives tools/list the schema and annotations.
      (async () => ({ content: [] })) as never,
    );
  }
  // tools/call is answered here rather than by McpServer's own handler, which turns every JSON-RPC error
  // but -32042 into an isError result: the MPP binding answers a refused credential with -32043.
  server.server.setRequestHandler("tools/call", async (request, ctx) => {
    const entry = served.get(request.params.name);
    if (!entry) throw new ProtocolError(-32602, `unknown tool ${request.params.name}`, {});
    const args = request.params.arguments ?? {};
    const problems = argumentProblems(entry.tool, entry.schema, args);
    if (problems) {
      return { isError: true, content: [{ type: "text", text: `Input validation error: ${problems}` }] };
    }
    const meta = (request.params._meta ?? ctx.mcpReq._meta) as Record<string, unknown> | undefined;
    return callTool(entry.tool, entry.route, args, meta, call, routes);
  });
  return server;
}
