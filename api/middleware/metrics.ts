import type { Next } from "koa";
import { httpDuration, httpRequests } from "../../shared/observability/metrics.js";
import type { AppContext } from "../route.js";

/**
 * Counts and times every request by its route TEMPLATE (@koa/router's `_matchedRoute`, e.g.
 * /api/execute/status/:invocation_id), never the raw path, so ids never become label values. Requests
 * no route matched share the label `unmatched`; the MCP transport and the queue dashboard, mounted
 * beside the router, their mount path. Sits outside the error middleware, so errors count with the
 * status they were answered with.
 */
export async function httpMetrics(ctx: AppContext, next: Next): Promise<void> {
  const started = performance.now();
  try {
    await next();
  } finally {
    const matched = (ctx as unknown as { _matchedRoute?: string | RegExp })._matchedRoute;
    const route =
      typeof matched === "string"
        ? matched
        : ctx.path === "/mcp"
          ? "/mcp"
          : ctx.path.startsWith("/admin/queues")
            ? "/admin/queues"
            : "unmatched";
    const status = String(ctx.status);
    httpRequests.inc({ method: ctx.method, route, status });
    httpDuration.observe(
      { method: ctx.method, route, status_class: `${status[0]}xx` },
      (performance.now() - started) / 1000,
    );
  }
}
