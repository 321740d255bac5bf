import type { TObject, TSchema } from "@sinclair/typebox";
import { plain } from "../openapi.js";
import type { RouteDef } from "../route.js";
import type { McpTool } from "./tools.js";

// A tool call as a request to the tool's own route, sent to this service through the socket the MCP
// request arrived on: the route validates, authenticates, limits, charges and records exactly as it does
// for HTTP callers (docs/mcp.md "One code path").

export interface Forwarded {
  status: number;
  headers: Headers;
  body: unknown;
}

/** The tool's input schema: the route's path parameters, query and body properties in one object. */
export function toolInputSchema(route: RouteDef, tool: McpTool): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const part of [route.params, route.query, route.body] as (TObject | undefined)[]) {
    if (!part) continue;
    const schema = plain(part as TSchema) as { properties?: Record<string, unknown>; required?: string[] };
    Object.assign(properties, schema.properties ?? {});
    required.push(...(schema.required ?? []));
    if (part === route.params) required.push(...Object.keys(schema.properties ?? {}));
  }
  if (tool.paid || tool.bridge) {
    properties.payment_signature = {
      type: "string",
      maxLength: 20_000,
      description:
        "optional: the base64 x402 PaymentPayload for this call (as PAYMENT-SIGNATURE), instead of _meta",
    };
  }
  return { type: "object", properties, required: [...new Set(required)], additionalProperties: false };
}

export async function forward(
  origin: string,
  route: RouteDef,
  args: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<Forwarded> {
  const pathKeys = new Set(route.params ? Object.keys((route.params as TObject).properties) : []);
  const rest: Record<string, unknown> = {};
  let path = route.path;
  for (const [key, value] of Object.entries(args)) {
    if (pathKeys.has(key)) path = path.replace(`{${key}}`, encodeURIComponent(String(value)));
    else if (key !== "payment_signature" && value !== undefined) rest[key] = value;
  }
  let url = `${origin}${path}`;
  let body: string | undefined;
  if (route.method === "get") {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(rest))
      query.set(key, typeof value === "string" ? value : JSON.stringify(value));
    if ([...query].length > 0) url += `?${query}`;
  } else {
    body = JSON.stringify(rest);
    headers["content-type"] = "application/json";
  }
  const res = await fetch(url, { method: route.method.toUpperCase(), headers, body, redirect: "manual" });
  const text = await res.text();
  let parsed: unknown = text;
  if (res.headers.get("content-type")?.includes("json") && text) parsed = JSON.parse(text);
  return { status: res.status, headers: res.headers, body: parsed };
}
