import { type Static, Type } from "@sinclair/typebox";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import {
  ADMIN_SESSION_COOKIE,
  ADMIN_SESSION_SECONDS,
  hasAdminSession,
  signInAdmin,
} from "../../shared/identity/index.js";
import { recheckDeposit, retryPayout } from "../../shared/money/index.js";
import { moneyConsole } from "../../shared/operations/index.js";
import { recheckSettlement } from "../../shared/x402/index.js";
import { consoleBody, consoleOffBody, signInBody } from "../pages/admin.js";
import { page } from "../pages/html.js";
import { type AppContext, defineRoute, Reply } from "../route.js";
import { isSameOrigin } from "../same-origin.js";

// The operator's pages (docs/operations.md "Pages"): sign-in with the admin key, the money console and
// its actions. No ADMIN_API_KEY → they answer 404, like the admin API.

const Html = Type.String({ description: "an HTML page" });

/** The session cookie: only for /admin, never readable by script, never sent cross-site. */
const SESSION_COOKIE = { path: "/admin", httpOnly: true, sameSite: "strict" } as const;

const session = (ctx: AppContext) => hasAdminSession(ctx.cookies.get(ADMIN_SESSION_COOKIE));

/**
 * The console's POST forms act only for a signed-in operator and only from this origin: the cookie is
 * SameSite=Strict, and the Origin (or Sec-Fetch-Site) header must say same-origin as well.
 */
function requireConsoleAction(ctx: AppContext): void {
  if (!getConfig().adminApiKey) throw new AppError("NOT_FOUND", "no such route");
  if (!session(ctx)) throw new AppError("UNAUTHORIZED", "sign in at /admin first");
  if (!isSameOrigin(ctx))
    throw new AppError("UNAUTHORIZED", "console actions are accepted from the console only");
}

const seeConsole = (notice: string) =>
  new Reply(
    303,
    "",
    { Location: `/admin?done=${encodeURIComponent(notice)}`, "Cache-Control": "no-store" },
    "text/plain",
  );

const ConsoleQuery = Type.Object(
  { done: Type.Optional(Type.String({ maxLength: 200 })) },
  { additionalProperties: false },
);

const adminRoute = defineRoute({
  method: "get",
  path: "/admin",
  tag: "pages",
  summary: "The operator's money console (HTML); a sign-in form without a session",
  auth: "none",
  contentType: "text/html",
  query: ConsoleQuery,
  responses: { 200: Html, 404: Html },
  async handle(ctx, { query }: { query: Static<typeof ConsoleQuery> }) {
    if (!getConfig().adminApiKey) return page({ title: "Operators", status: 404 }, consoleOffBody());
    if (!session(ctx)) return page({ title: "Operator sign-in" }, signInBody());
    const view = await moneyConsole({ stuckSeconds: 600, limit: 100 });
    return page({ title: "Money console" }, consoleBody(view as never, query.done));
  },
});

const SignInBody = Type.Object({ token: Type.String({ maxLength: 500 }) });

const signInRoute = defineRoute({
  method: "post",
  path: "/admin/sign-in",
  tag: "pages",
  summary: "Operator sign-in with ADMIN_API_KEY (form); sets an HttpOnly SameSite=Strict session cookie",
  auth: "none",
  contentType: "text/html",
  limitPerClient: true,
  body: SignInBody,
  responses: { 303: Type.String(), 401: Html, 404: Html },
  async handle(ctx, { body }: { body: Static<typeof SignInBody> }) {
    if (!getConfig().adminApiKey) return page({ title: "Operators", status: 404 }, consoleOffBody());
    let cookie: string;
    try {
      cookie = signInAdmin(body.token);
    } catch (err) {
      if (err instanceof AppError && err.code === "UNAUTHORIZED")
        return page({ title: "Operator sign-in", status: 401 }, signInBody("That is not the admin key."));
      throw err;
    }
    ctx.cookies.set(ADMIN_SESSION_COOKIE, cookie, {
      ...SESSION_COOKIE,
      secure: ctx.secure,
      maxAge: ADMIN_SESSION_SECONDS * 1000,
      overwrite: true,
    });
    return new Reply(303, "", { Location: "/admin", "Cache-Control": "no-store" }, "text/plain");
  },
});

const signOutRoute = defineRoute({
  method: "post",
  path: "/admin/sign-out",
  tag: "pages",
  summary: "Ends the operator's session (form)",
  auth: "none",
  contentType: "text/plain",
  responses: { 303: Type.String() },
  async handle(ctx) {
    ctx.cookies.set(ADMIN_SESSION_COOKIE, "", { ...SESSION_COOKIE, maxAge: 0 });
    return new Reply(303, "", { Location: "/admin", "Cache-Control": "no-store" }, "text/plain");
  },
});

const IdParams = Type.Object({ id: Type.String({ format: "uuid" }) });

const consoleActions = (
  [
    [
      "payouts",
      "retry",
      "Retry (failed) or re-drive (open) a payout from the console (form)",
      retryPayout,
      "payout",
    ],
    [
      "settlements",
      "recheck",
      "Re-check an x402 settlement from the console (form)",
      recheckSettlement,
      "settlement",
    ],
    ["deposits", "recheck", "Re-check a deposit from the console (form)", recheckDeposit, "deposit"],
  ] as const
).map(([area, verb, summary, act, noun]) =>
  defineRoute({
    method: "post",
    path: `/admin/${area}/{id}/${verb}`,
    tag: "pages",
    summary,
    auth: "none",
    contentType: "text/plain",
    params: IdParams,
    responses: { 303: Type.String() },
    errors: ["UNAUTHORIZED", "NOT_FOUND", "CONFLICT"],
    async handle(ctx, { params }: { params: Static<typeof IdParams> }) {
      requireConsoleAction(ctx);
      await act(params.id, ctx.state.requestId);
      return seeConsole(`${noun} ${params.id}: ${verb} sent`);
    },
  }),
);

export const adminPageRoutes = [adminRoute, signInRoute, signOutRoute, ...consoleActions];
