import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { Next } from "koa";
import { inSpan, remoteContext, tracingOn } from "../../shared/observability/tracing.js";
import type { AppContext } from "../route.js";

/**
 * One SERVER span per request (docs/operations.md "Traces"), named by the route template once the
 * router matched it, child of the caller's traceparent when one is sent. A no-op while tracing is off.
 */
export async function httpTrace(ctx: AppContext, next: Next): Promise<void> {
  if (!tracingOn()) return next();
  const parent = remoteContext({
    traceparent: ctx.get("traceparent") || undefined,
    tracestate: ctx.get("tracestate") || undefined,
  });
  await inSpan(
    `${ctx.method}`,
    {
      kind: SpanKind.SERVER,
      parent,
      attributes: { "http.request.method": ctx.method, request_id: ctx.state.requestId },
    },
    async (span) => {
      try {
        await next();
      } finally {
        const route = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
        if (typeof route === "string") {
          span.updateName(`${ctx.method} ${route}`);
          span.setAttribute("http.route", route);
        }
        span.setAttribute("http.response.status_code", ctx.status);
        if (ctx.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      }
    },
  );
}
