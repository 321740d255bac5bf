import type { Context } from "koa";

/**
 * Whether a browser request comes from our own origin: Sec-Fetch-Site where the browser sends it, else
 * the Origin header. The operator's forms and the queue dashboard accept writes only from themselves.
 */
export function isSameOrigin(ctx: Context): boolean {
  const site = ctx.get("sec-fetch-site");
  return site ? site === "same-origin" : ctx.get("origin") === `${ctx.protocol}://${ctx.host}`;
}
