import type { Next } from "koa";
import type { AppContext } from "../route.js";

/**
 * Security headers on every answer (docs/reliability.md "Edges"). Set before the route runs, so a route
 * that serves a page may replace the Content-Security-Policy with its own; the default suits JSON and
 * text: nothing may load, nothing may frame it, and browsers must not sniff a type we did not send.
 */
export async function securityHeaders(ctx: AppContext, next: Next): Promise<void> {
  ctx.set("X-Content-Type-Options", "nosniff");
  ctx.set("Referrer-Policy", "no-referrer");
  ctx.set("X-Frame-Options", "DENY");
  ctx.set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'");
  await next();
}
