import type Koa from "koa";
import { getConfig } from "../shared/config.js";
import { AppError } from "../shared/errors.js";
import { ADMIN_SESSION_COOKIE, authenticateAdmin, hasAdminSession } from "../shared/identity/index.js";
import { QUEUE_NAMES } from "../shared/queue-names.js";
import { getQueue } from "../shared/queues.js";
import { isSameOrigin } from "./same-origin.js";

// The queue dashboard (docs/operations.md "Queue dashboard"): bull-board at /admin/queues, for the
// operator only — the admin key as a bearer token, or the /admin sign-in's session cookie (a browser).
// Read-only: every request that would change a queue is refused, except retrying failed jobs when
// ADMIN_QUEUE_RETRIES=true. Mounted before the JSON body reader, which would consume bull-board's bodies.

export const QUEUE_DASHBOARD_PATH = "/admin/queues";

/** The only writes the dashboard may make, and only with ADMIN_QUEUE_RETRIES=true. */
const RETRY = [/^\/api\/queues\/[^/]+\/retry\/failed$/, /^\/api\/queues\/[^/]+\/[^/]+\/retry$/];

function isRetry(ctx: Koa.Context): boolean {
  const sub = ctx.path.slice(QUEUE_DASHBOARD_PATH.length);
  return ctx.method === "PUT" && RETRY.some((r) => r.test(sub));
}

function within(path: string): boolean {
  return path === QUEUE_DASHBOARD_PATH || path.startsWith(`${QUEUE_DASHBOARD_PATH}/`);
}

/** Who may look: the admin bearer token, or a browser session from /admin (same origin for writes). */
function guard(ctx: Koa.Context): "ok" | "sign_in" {
  if (!getConfig().adminApiKey) throw new AppError("NOT_FOUND", "no such route");
  const header = ctx.get("authorization");
  if (header) {
    authenticateAdmin(header);
    return "ok";
  }
  if (!hasAdminSession(ctx.cookies.get(ADMIN_SESSION_COOKIE))) return "sign_in";
  if (ctx.method !== "GET" && ctx.method !== "HEAD") {
    if (!isSameOrigin(ctx))
      throw new AppError("UNAUTHORIZED", "dashboard actions are accepted from the dashboard only");
  }
  return "ok";
}

/**
 * bull-board itself, built on first use: an app that never serves it opens no queue, and a process
 * never loads bull-board's modules (its views and their template engines, some 150 files) until an
 * operator opens the dashboard.
 */
async function buildBoard(retries: boolean): Promise<Koa.Middleware> {
  const [{ createBullBoard }, { BullMQAdapter }, { KoaAdapter }] = await Promise.all([
    import("@bull-board/api"),
    import("@bull-board/api/bullMQAdapter"),
    import("@bull-board/koa"),
  ]);
  const server = new KoaAdapter();
  server.setBasePath(QUEUE_DASHBOARD_PATH);
  createBullBoard({
    // readOnlyMode is all or nothing in bull-board; with retries allowed the guard above refuses every
    // other write (clean, remove, promote, pause, obliterate, add…).
    queues: QUEUE_NAMES.map(
      (name) => new BullMQAdapter(getQueue(name), { readOnlyMode: !retries, allowRetries: retries }),
    ),
    serverAdapter: server,
    options: { uiConfig: { boardTitle: "Agent Market queues" } },
  });
  return server.registerPlugin() as unknown as Koa.Middleware;
}

/** The dashboard as one Koa middleware that passes every other path on. */
export function queueDashboard(): Koa.Middleware {
  const boards = new Map<boolean, Promise<Koa.Middleware>>();
  return async (ctx, next) => {
    if (!within(ctx.path)) return next();
    if (guard(ctx) === "sign_in") {
      if (ctx.method === "GET" && ctx.accepts("html", "json") === "html") {
        ctx.redirect("/admin");
        return;
      }
      throw new AppError("UNAUTHORIZED", "sign in at /admin or send Authorization: Bearer <admin key>");
    }
    const retries = getConfig().adminQueueRetries;
    const write = !["GET", "HEAD", "OPTIONS"].includes(ctx.method);
    if (write && !(retries && isRetry(ctx))) {
      throw new AppError(
        "POLICY_BLOCKED",
        retries
          ? "the queue dashboard only retries failed jobs"
          : "the queue dashboard is read-only (ADMIN_QUEUE_RETRIES=true allows retrying failed jobs)",
      );
    }
    // bull-board's UI is its own single-page app (scripts and styles from its static path, an inline
    // bootstrap script): it replaces the API's closed default policy (security-headers.ts) with one
    // that lets that app run from our origin and nothing else.
    ctx.set(
      "Content-Security-Policy",
      "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    );
    if (!boards.has(retries)) boards.set(retries, buildBoard(retries));
    return (await boards.get(retries)!)(ctx, next);
  };
}
