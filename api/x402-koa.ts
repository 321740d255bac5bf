import type { HTTPAdapter, HTTPRequestContext } from "@x402/core/server";
import type { AppContext } from "./route.js";

// The Koa adapter of @x402/core (there is no @x402/koa; notes §3): the HTTPAdapter the SDK's resource
// server reads a request through. Routes hand this — never the Koa context — to the gateway's domain
// code, which reads payment headers and the method/path for the bazaar extension from it.

/** The x402 view of a Koa request. */
export function x402Request(ctx: AppContext): HTTPRequestContext {
  const adapter: HTTPAdapter = {
    getHeader: (name) => ctx.get(name) || undefined,
    getMethod: () => ctx.method,
    getPath: () => ctx.path,
    getUrl: () => ctx.href,
    getAcceptHeader: () => ctx.get("accept"),
    getUserAgent: () => ctx.get("user-agent"),
    getQueryParams: () => ctx.query as Record<string, string | string[]>,
    getQueryParam: (name) => ctx.query[name],
    getBody: () => (ctx.request as { body?: unknown }).body,
  };
  return { adapter, path: ctx.path, method: ctx.method };
}
