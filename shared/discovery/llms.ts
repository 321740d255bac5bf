import { createHash } from "node:crypto";
import { PLATFORM_MAX_LATENCY_MS, ROUTER_MAX_ATTEMPTS } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { ERRORS } from "../errors.js";
import { LANES, type LiveFacts, SERVICE_NAME, SERVICE_SUMMARY } from "./facts.js";
import type { DiscoverySources, RouteFact } from "./sources.js";
import { hasRoute, urlOf } from "./sources.js";

// /llms.txt (the llmstxt.org structure: H1, blockquote summary, paragraphs, H2 link lists, "Optional")
// and /llms-full.txt (the whole agent reference, every route with its schemas) with its sha256 line.

/** The public documents every agent-facing guide links, in the order an agent needs them. */
export function entryLinks(sources: DiscoverySources) {
  const u = (path: string) => urlOf(sources, path);
  return {
    start: [
      [
        "Quickstart",
        u("/api/quickstart"),
        "what registering takes; POST it with {name, intent} for an API key",
      ],
      ["Market document", u("/market.json"), "catalog and availability: read it before any paid action"],
      ["OpenAPI", u("/openapi.json"), "every route, schema and error code (also /openapi.yaml)"],
      ["Agent guide", u("/agents.txt"), "register, free call, fund, paid call, x402 without a key"],
      ["Skill", u("/skill.md"), "the same steps as an Agent Skill with runnable curl examples"],
    ],
    services: [
      ["Capabilities", u("/api/capabilities"), "the catalog with full listing records, by lane"],
      ["Machine catalog", u("/api/catalog"), "compact: price, input schema and invoke paths per listing"],
      ["Echo", u("/api/tools/echo?message=hello"), "free connectivity check"],
      ...(hasRoute(sources, "get", "/api/verification")
        ? [
            [
              "Verification service",
              u("/api/verification"),
              "5 USDC probes of an endpoint you name (http-json, x402, mcp) with signed attestations anyone can verify",
            ],
          ]
        : []),
    ],
    payments: [
      ["Pricing", u("/api/wallet/pricing"), "fees, split, deposit terms and the chain"],
      ["Payment network", u("/api/x402/info"), "network, asset and addresses for USDC payments"],
      ["x402 marketplace", u("/api/x402/marketplace"), "pay per call without registering (x402 v2, MPP)"],
      ["x402 service card", u("/.well-known/x402/service.json"), "networks, asset, payTo, protocols"],
    ],
    discovery: [
      ["Index", u("/api/index.json"), "every discovery document with its media type and sha256"],
      ["Discovery", u("/api/discovery"), "protocols, networks, auth schemes, tools, lanes, entry points"],
      ["Service descriptor", u("/.well-known/agent-marketplace.json"), "name, entry points, fee, keys"],
      ["A2A Agent Card", u("/.well-known/agent-card.json"), "A2A v1.0, signed with our published key"],
      ...(sources.mcp
        ? [["MCP server", u("/.well-known/mcp/server.json"), "MCP registry server.json for our /mcp"]]
        : []),
      ["Signing keys", u("/.well-known/jwks.json"), "Ed25519 keys that sign seller calls and documents"],
    ],
    optional: [
      ["Full reference", u("/llms-full.txt"), "flows, every route with its schemas, error codes, limits"],
      ["Public proof", u("/public-proof.json"), "evidence-backed figures from live data"],
      ["Stats", u("/api/stats"), "market snapshot"],
      ["Health", u("/api/health"), "liveness of the API, database and queues"],
      ["Self-check", u("/api/discovery/check"), "validates every discovery document and link"],
    ],
  } as const;
}

const list = (links: readonly (readonly string[])[]) =>
  links.map(([name, url, note]) => `- [${name}](${url}): ${note}`).join("\n");

function paidLine(facts: LiveFacts): string {
  return facts.paidExecution.enabled
    ? `Paid execution is enabled: USDC on ${facts.chainName} (${facts.network}).`
    : `Paid execution is disabled now (${facts.paidExecution.reason ?? "unavailable"}): free calls work; do not pay.`;
}

export function llmsTxt(sources: DiscoverySources, facts: LiveFacts): string {
  const links = entryLinks(sources);
  return `# ${SERVICE_NAME}

> ${SERVICE_SUMMARY}

Base URL: ${sources.baseUrl}. ${paidLine(facts)} Sellers receive ${100 - facts.feeRate * 100} % of each paid call, the platform keeps ${facts.feeRate * 100} %. Errors use one JSON envelope with a code, a retryable flag and what to do next.

## Start

${list(links.start)}

## Call services

${list(links.services)}

## Pay

${list(links.payments)}

## Discovery

${list(links.discovery)}

## Optional

${list(links.optional)}
`;
}

const json = (value: unknown) => JSON.stringify(value);

function routeSection(r: RouteFact): string {
  const lines = [
    `### ${r.method.toUpperCase()} ${r.path}`,
    "",
    r.summary + (r.description ? `. ${r.description}` : ""),
    "",
  ];
  lines.push(
    `- Auth: ${r.auth === "key" ? "Authorization: Bearer <api_key>" : "none"}${r.paid ? "; paid: 402 challenge, then a signed x402 or MPP payment on the retry" : ""}`,
  );
  if (r.params) lines.push(`- Path parameters (JSON Schema): ${json(r.params)}`);
  if (r.query) lines.push(`- Query (JSON Schema): ${json(r.query)}`);
  if (r.body) lines.push(`- Body (JSON Schema): ${json(r.body)}`);
  for (const [status, schema] of Object.entries(r.responses))
    lines.push(`- Response ${status} (JSON Schema): ${json(schema)}`);
  if (r.errors.length > 0) lines.push(`- Errors: ${r.errors.join(", ")}`);
  return lines.join("\n");
}

export function llmsFullTxt(sources: DiscoverySources, facts: LiveFacts): string {
  const config = getConfig();
  const u = (path: string) => urlOf(sources, path);
  const errors = Object.entries(ERRORS)
    .map(
      ([code, e]) =>
        `- ${code}: HTTP ${e.status}, retryable ${e.retryable}, buyer action ${e.buyerAction}, fallback ${e.fallback}`,
    )
    .join("\n");
  return `# ${SERVICE_NAME}: full agent reference

> ${SERVICE_SUMMARY}

Base URL: ${sources.baseUrl}. ${paidLine(facts)} Generated from the route declarations and the configuration of this deployment; the short index is ${u("/llms.txt")}, the machine form ${u("/openapi.json")}.

## Flows

1. Register: POST ${u("/api/quickstart")} with {"name": "...", "intent": "buyer"|"seller"|"both"}. The answer holds api_key (shown once) and signing_key. Send the key as Authorization: Bearer <api_key>.
2. Free call: POST ${u("/api/execute")} with {"task": "echo", "input": {"message": "hi"}} (a task alias or listing slug). The router picks a provider, falls back when one fails, and answers {success, output} with a receipt_id, or 202 with a status_url to poll (GET /api/execute/status/{invocation_id}, honour Retry-After).
3. Choose yourself: GET ${u("/api/execute/match")}?task=<task> ranks providers; POST /api/invoke/{listing_id} calls one listing.
4. Fund: read ${u("/market.json")} first; when availability.paid_execution is enabled, POST /api/wallet/purchase {"amount_usdc": 5} answers where to send USDC on ${facts.chainName} (${facts.network}); then POST /api/wallet/purchase/verify with the transaction hash (or sign a gasless EIP-3009 authorization: POST /api/wallet/purchase/authorize).
5. Paid call: POST /api/execute with "constraints": {"max_cost": <USDC>}. The price is held from your balance and captured only when the call succeeds (${100 - facts.feeRate * 100} % to the seller, ${facts.feeRate * 100} % to the platform); a failed call releases the hold. GET /api/commerce/receipts/{receipt_id} shows the split and evidence.
6. Without registering: GET ${u("/api/x402/execute/match")}?task=<task> quotes a listing; POST /api/x402/execute (or /api/x402/invoke/{listing_id}) answers 402 with PAYMENT-REQUIRED (x402 v2) and WWW-Authenticate: Payment (MPP); retry with a signed EIP-3009 payment in PAYMENT-SIGNATURE (or X-PAYMENT, or Authorization: Payment). A failed call is never settled.
7. Sandbox: the tumbler (/api/tumbler/*) runs the same router on simulated tUSDC credits.
8. Sell: POST /api/capabilities with an endpoint URL, a price and a JSON Schema input; calls to your endpoint are signed with our key (${facts.jwksUrl}).

## Limits

- Keyless routes that write rows: ${config.keylessRequestsPerMinute} requests a minute per client and route (429 RATE_LIMITED with retry_after_seconds).
- Execute waits up to ${config.executeSyncWaitMs} ms for a result, then answers 202 with a status URL.
- A provider call lasts at most ${PLATFORM_MAX_LATENCY_MS} ms; the router makes up to ${ROUTER_MAX_ATTEMPTS} provider attempts when a listing is safe_to_retry, else 1.
- Listings declare rate_limit and concurrency_limit; calls beyond them are passed over or refused with RATE_LIMITED.
- Idempotency: X-Idempotency-Key (or idempotency_key in the body) makes a retried POST run once.
- Discovery lanes: ${Object.entries(LANES)
    .map(([lane, text]) => `${lane} (${text})`)
    .join("; ")}.

## Error codes

Every error is {"success": false, "error": {"code", "message", "retryable", "buyer_action", "fallback", "request_id", ...}}. Retry only when retryable is true.

${errors}

## Routes

${sources.routes.map(routeSection).join("\n\n")}
`;
}

/** `sha256sum` output for the exact body of /llms-full.txt. */
export function sha256Line(body: string, fileName: string): string {
  return `${createHash("sha256").update(body, "utf8").digest("hex")}  ${fileName}\n`;
}
