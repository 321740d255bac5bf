import type { Method } from "../route.js";

// The MCP tools (docs/mcp.md): each is one route of the HTTP API, so its input schema is that route's
// own declaration (path parameters, query and body merged into one object) and its behaviour — validation,
// auth, limits, money, evidence — is the route's, served through the same code path.

export interface McpTool {
  name: string;
  title: string;
  description: string;
  method: Method;
  path: string;
  /** Sends the caller's API key (Authorization: Bearer amk_…) to the route. */
  keyed: boolean;
  /** Paid at the x402 edge: a payment-required answer, then a retry carrying the payment. */
  paid: boolean;
  /**
   * Keyed calls whose balance cannot pay are bridged to the x402 edge (docs/mcp.md "The bridge"): the
   * answer is a payment challenge for the same call, and the retry carrying the payment is made there.
   */
  bridge?: "execute" | "invoke";
  annotations: {
    readOnlyHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
    destructiveHint?: boolean;
  };
}

const read = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };
const call = { readOnlyHint: false, idempotentHint: false, openWorldHint: true, destructiveHint: false };

export const MCP_TOOLS: McpTool[] = [
  {
    name: "agentmarket_browse_services",
    title: "Browse services",
    description:
      "The machine catalog: public listings with price, input schema and how to invoke, by lane, paged",
    method: "get",
    path: "/api/catalog",
    keyed: false,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_search",
    title: "Search services",
    description:
      "Search listings by text and category; full listing records with pricing, proof and invocation contract",
    method: "get",
    path: "/api/capabilities",
    keyed: false,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_categories",
    title: "Service categories",
    description: "The categories of public listings with how many listings each holds, most first",
    method: "get",
    path: "/api/categories",
    keyed: false,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_quote",
    title: "Quote a task on the x402 edge",
    description:
      "Ranks listings for a task and quotes the best one for payment without an API key (quote id, price, expiry)",
    method: "get",
    path: "/api/x402/execute/match",
    keyed: false,
    paid: false,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
  },
  {
    name: "agentmarket_register",
    title: "Register an agent",
    description: "Creates an agent and answers its API key (shown once) and signing key",
    method: "post",
    path: "/api/quickstart",
    keyed: false,
    paid: false,
    annotations: { readOnlyHint: false, idempotentHint: false, openWorldHint: false },
  },
  {
    name: "agentmarket_call_service",
    title: "Call a listed service, paying with x402",
    description:
      "Calls one listing without an API key. Unpaid, it answers the payment requirements; retry the same call " +
      "with the signed payment (x402 _meta, MPP credential, or the payment_signature argument)",
    method: "post",
    path: "/api/x402/invoke/{listing_id}",
    keyed: false,
    paid: true,
    annotations: call,
  },
  {
    name: "agentmarket_x402_test",
    title: "Test the x402 edge",
    description: "A free echo through the x402 edge: checks connectivity to the paid edge without paying",
    method: "get",
    path: "/api/x402/test/echo",
    keyed: false,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_edge_receipt",
    title: "Status and receipt of an x402 call",
    description: "The status, settlement state and receipt of an invocation bought on the x402 edge",
    method: "get",
    path: "/api/x402/status/{invocation_id}",
    keyed: false,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_match",
    title: "Rank providers for a task",
    description:
      "Eligible providers in the order execute would try them, with price, latency, success rate and scores",
    method: "get",
    path: "/api/execute/match",
    keyed: true,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_execute",
    title: "Execute a task",
    description:
      "Routes a task to the best provider with fallback; paid tasks are held from your balance and charged on success",
    method: "post",
    path: "/api/execute",
    keyed: true,
    paid: false,
    bridge: "execute",
    annotations: call,
  },
  {
    name: "agentmarket_invoke",
    title: "Invoke one listing",
    description:
      "Calls one listing directly (no fallback); paid listings are charged from your balance on success",
    method: "post",
    path: "/api/invoke/{listing_id}",
    keyed: true,
    paid: false,
    bridge: "invoke",
    annotations: call,
  },
  {
    name: "agentmarket_status",
    title: "Invocation status",
    description: "Status, attempts, cost, receipt id and settlement state of one of your invocations",
    method: "get",
    path: "/api/execute/status/{invocation_id}",
    keyed: true,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_receipt",
    title: "Receipt",
    description: "A receipt of yours: outcome, amount, the seller/platform split and provider evidence",
    method: "get",
    path: "/api/commerce/receipts/{receipt_id}",
    keyed: true,
    paid: false,
    annotations: read,
  },
  {
    name: "agentmarket_wallet",
    title: "Wallet",
    description: "Your balances (available, held, payable, bonds), linked wallet, deposits and funding state",
    method: "get",
    path: "/api/wallet",
    keyed: true,
    paid: false,
    annotations: read,
  },
];
