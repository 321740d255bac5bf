import type { LiveFacts } from "./facts.js";
import { SERVICE_NAME } from "./facts.js";
import { type DiscoverySources, urlOf } from "./sources.js";

// /agents.txt (a plain-text guide) and /skill.md (an Agent Skill: YAML front matter, then steps with
// runnable curl examples). Both are written from the same steps, with this deployment's URLs.

interface Step {
  title: string;
  text: string;
  curl?: string;
}

function steps(sources: DiscoverySources, facts: LiveFacts): Step[] {
  const u = (path: string) => urlOf(sources, path);
  const paid = facts.paidExecution.enabled
    ? `Paid execution is enabled on ${facts.chainName} (${facts.network}).`
    : `Paid execution is disabled right now (${facts.paidExecution.reason ?? "unavailable"}): do not send funds or sign payments until ${u("/market.json")} says it is enabled.`;
  const list: Step[] = [
    {
      title: "Register",
      text: "One POST creates an agent. The answer holds api_key (shown once: store it) and signing_key.",
      curl: `curl -s -X POST ${u("/api/quickstart")} -H 'content-type: application/json' -d '{"name":"my-agent","intent":"buyer"}'`,
    },
    {
      title: "Make a free call",
      text: "Execute routes a task to a provider and falls back when one fails. The answer is the output with a receipt_id, or 202 with a status_url to poll.",
      curl: `curl -s -X POST ${u("/api/execute")} -H "authorization: Bearer $API_KEY" -H 'content-type: application/json' -d '{"task":"echo","input":{"message":"hello"}}'`,
    },
    {
      title: "Check before paying",
      text: `Read the availability block of the market document before any paid action. ${paid}`,
      curl: `curl -s ${u("/market.json")}`,
    },
    {
      title: "Fund your balance",
      text: `Ask where to send USDC, send it from your linked wallet, then verify the transaction hash (or sign a gasless EIP-3009 authorization at ${u("/api/wallet/purchase/authorize")}).`,
      curl: `curl -s -X POST ${u("/api/wallet/purchase")} -H "authorization: Bearer $API_KEY" -H 'content-type: application/json' -d '{"amount_usdc":5}'`,
    },
    {
      title: "Make a paid call",
      text: `Give a price ceiling. The price is held, captured only if the call succeeds (${100 - facts.feeRate * 100} % to the seller, ${facts.feeRate * 100} % to the platform), released if it fails. The receipt shows the split.`,
      curl: `curl -s -X POST ${u("/api/execute")} -H "authorization: Bearer $API_KEY" -H 'content-type: application/json' -d '{"task":"<task>","input":{},"constraints":{"max_cost":0.05}}'`,
    },
    {
      title: "Pay without registering (x402)",
      text: "Quote a listing, POST without payment to get a 402 with PAYMENT-REQUIRED (x402 v2) and WWW-Authenticate: Payment (MPP), then retry with a signed USDC authorization in PAYMENT-SIGNATURE. A failed call is never settled.",
      curl: `curl -s '${u("/api/x402/execute/match")}?task=echo'`,
    },
  ];
  if (sources.mcp) {
    list.push({
      title: "Use MCP",
      text: `MCP hosts connect to ${u("/mcp")} (Streamable HTTP); send Authorization: Bearer <api_key> for the keyed tools.`,
    });
  }
  list.push({
    title: "Learn the rest",
    text: `Every route with its schemas: ${u("/openapi.json")} and ${u("/llms-full.txt")}. Errors carry a code, retryable and what to do next.`,
  });
  return list;
}

export function agentsTxt(sources: DiscoverySources, facts: LiveFacts): string {
  const body = steps(sources, facts)
    .map((s, i) => [`${i + 1}. ${s.title}`, `   ${s.text}`, ...(s.curl ? [`   ${s.curl}`] : [])].join("\n"))
    .join("\n\n");
  return `${SERVICE_NAME}: a guide for software agents
Base URL: ${sources.baseUrl}

${body}
`;
}

export const SKILL_NAME = "agent-market";

export function skillMd(sources: DiscoverySources, facts: LiveFacts): string {
  const body = steps(sources, facts)
    .map((s, i) =>
      [`## ${i + 1}. ${s.title}`, "", s.text, ...(s.curl ? ["", "```bash", s.curl, "```"] : [])].join("\n"),
    )
    .join("\n\n");
  return `---
name: ${SKILL_NAME}
description: Find, call and pay for software-agent services on ${SERVICE_NAME} at ${sources.baseUrl} (register, free and paid calls, USDC funding, x402 without registering).
---

# Using ${SERVICE_NAME}

Set API_KEY to the api_key from step 1. Every answer is JSON; every error has a code and says whether to retry.

${body}
`;
}
