import { type Static, Type } from "@sinclair/typebox";
import { catalogPage, listingHistory, listingRecordById } from "../../shared/catalog/index.js";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import {
  ADMIN_SESSION_COOKIE,
  ADMIN_SESSION_SECONDS,
  hasAdminSession,
  signInAdmin,
} from "../../shared/identity/index.js";
import { recheckDeposit, retryPayout } from "../../shared/money/index.js";
import { moneyConsole, serviceStatus } from "../../shared/operations/index.js";
import { marketStats } from "../../shared/system/index.js";
import { recheckSettlement } from "../../shared/x402/index.js";
import { consoleBody, consoleOffBody, signInBody } from "../pages/admin.js";
import { page } from "../pages/html.js";
import { catalogBody, homeBody, listingBody, notFoundBody, statusBody } from "../pages/public.js";
import { type AppContext, defineRoute, Reply, type RouteDef } from "../route.js";

// Pages for people (docs/operations.md "Pages"): server-rendered HTML, no script, a strict CSP. The
// home page is GET / for browsers (Accept: text/html); agents keep getting llms.txt there.

const Html = Type.String({ description: "an HTML page" });
const PUBLIC_CACHE = "public, max-age=10";

/** Whether the client prefers HTML to plain text (a browser), so GET / answers the home page. */
export function prefersHtml(ctx: AppContext): boolean {
  return ctx.accepts("text/plain", "text/html") === "text/html";
}

/** GET / for browsers: the home page; every other client keeps the route's own answer (llms.txt). */
export function withHomePage(root: RouteDef): RouteDef {
  return {
    ...root,
    description: "Agents get llms.txt; a browser (Accept: text/html first) gets the home page.",
    async handle(ctx, input) {
      if (!prefersHtml(ctx)) return root.handle(ctx, input);
      const reply = page(
        { title: "Home", cache: PUBLIC_CACHE },
        homeBody(await marketStats(), getConfig().publicBaseUrl),
      );
      return new Reply(reply.status, reply.body, { ...reply.headers, Vary: "Accept" }, reply.contentType);
    },
  };
}

const CatalogPageQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ maxLength: 200 })),
    lane: Type.Optional(
      Type.Union([Type.Literal("featured"), Type.Literal("search"), Type.Literal("registry")]),
    ),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
  },
  { additionalProperties: false },
);
const PAGE_SIZE = 20;

const catalogRoute = defineRoute({
  method: "get",
  path: "/catalog",
  tag: "pages",
  summary: "The catalog for people: search, lanes, paging (HTML)",
  auth: "none",
  contentType: "text/html",
  query: CatalogPageQuery,
  responses: { 200: Html },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  async handle(_ctx, { query }: { query: Static<typeof CatalogPageQuery> }) {
    const search = query.search?.trim() || undefined;
    const lane = query.lane ?? "registry";
    const offset = query.offset ?? 0;
    const result = await catalogPage({ search, visibility: lane, limit: PAGE_SIZE, offset });
    const listings = result.capabilities.map((r) => ({
      id: String(r.id),
      name: String(r.name),
      slug: String(r.slug),
      description: String(r.description),
      category: String(r.category),
      price: Number(r.price_per_unit),
      currency: String(r.currency),
    }));
    return page(
      { title: "Catalog", cache: PUBLIC_CACHE },
      catalogBody({
        search,
        lane,
        limit: PAGE_SIZE,
        offset,
        total: result.total,
        hasMore: result.has_more,
        listings,
      }),
    );
  },
});

const ListingPageParams = Type.Object({ id: Type.String({ maxLength: 100 }) });

const listingRoute = defineRoute({
  method: "get",
  path: "/listings/{id}",
  tag: "pages",
  summary: "One listing for people: its record, uptime and latency charts (HTML)",
  auth: "none",
  contentType: "text/html",
  params: ListingPageParams,
  responses: { 200: Html, 404: Html },
  async handle(_ctx, { params }: { params: Static<typeof ListingPageParams> }) {
    const found = await Promise.all([listingRecordById(params.id), listingHistory(params.id)]).catch(
      (err) => {
        if (err instanceof AppError && err.code === "LISTING_NOT_FOUND") return undefined;
        throw err;
      },
    );
    if (!found) return page({ title: "Not found", status: 404 }, notFoundBody());
    const [record, history] = found;
    return page(
      { title: String(record.name), cache: PUBLIC_CACHE },
      listingBody(record as unknown as Record<string, unknown>, history),
    );
  },
});

const statusRoute = defineRoute({
  method: "get",
  path: "/status",
  tag: "pages",
  summary: "Service status for people: dependencies, queues, hosted tools' uptime (HTML)",
  auth: "none",
  contentType: "text/html",
  responses: { 200: Html, 503: Html },
  async handle() {
    const status = await serviceStatus();
    return page(
      { title: "Status", cache: "no-store", status: status.health.status === "ok" ? 200 : 503 },
      statusBody(status as never),
    );
  },
});

const session = (ctx: AppContext) => hasAdminSession(ctx.cookies.get(ADMIN_SESSION_COOKIE));

/**
 * The console's POST forms act only for a signed-in operator and only from this origin: the cookie is
 * SameSite=Strict, and the Origin (or Sec-Fetch-Site) header must say same-origin as well.
 */
function requireConsoleAction(ctx: AppContext): void {
  if (!getConfig().adminApiKey) throw new AppError("NOT_FOUND", "no such route");
  if (!session(ctx)) throw new AppError("UNAUTHORIZED", "sign in at /admin first");
  const site = ctx.get("sec-fetch-site");
  const origin = ctx.get("origin");
  const sameOrigin = site ? site === "same-origin" : origin === `${ctx.protocol}://${ctx.host}`;
  if (!sameOrigin) throw new AppError("UNAUTHORIZED", "console actions are accepted from the console only");
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
      httpOnly: true,
      sameSite: "strict",
      secure: ctx.secure,
      path: "/admin",
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
    ctx.cookies.set(ADMIN_SESSION_COOKIE, "", {
      path: "/admin",
      maxAge: 0,
      httpOnly: true,
      sameSite: "strict",
    });
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

export const pageRoutes = [
  catalogRoute,
  listingRoute,
  statusRoute,
  adminRoute,
  signInRoute,
  signOutRoute,
  ...consoleActions,
];
