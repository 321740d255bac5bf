import { randomUUID } from "node:crypto";
import type { Next } from "koa";
import { logger, withLogScope } from "../../shared/log.js";
import type { AppContext } from "../route.js";

const SAFE_ID = /^[A-Za-z0-9._-]{8,128}$/;

/** Gives every request an id (the caller's X-Request-Id when sane), echoes it, and logs the outcome. */
export async function requestId(ctx: AppContext, next: Next): Promise<void> {
  const offered = ctx.get("x-request-id");
  const id = SAFE_ID.test(offered) ? offered : randomUUID();
  ctx.state.requestId = id;
  ctx.set("X-Request-Id", id);
  const started = performance.now();
  try {
    // Every line logged while serving this request, and the jobs it enqueues, carry its id.
    await withLogScope({ request_id: id }, next);
  } finally {
    // The line's fields (the path among them) are gathered only when info lines are written.
    if (logger().isLevelEnabled("info"))
      logger().info(
        {
          request_id: id,
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round((performance.now() - started) * 10) / 10,
          agent_id: ctx.state.auth?.agentId,
        },
        "request",
      );
  }
}
