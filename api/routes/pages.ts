import { type Static, Type } from "@sinclair/typebox";
import { catalogPage, listingHistory, listingRecordById } from "../../shared/catalog/index.js";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import { serviceStatus } from "../../shared/operations/index.js";
import { marketStats } from "../../shared/system/index.js";
import { page } from "../pages/html.js";
import { catalogBody, homeBody, listingBody, notFoundBody, statusBody } from "../pages/public.js";
import { type AppContext, defineRoute, Reply, type RouteDef } from "../route.js";
import { adminPageRoutes } from "./admin-pages.js";

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
        totalIsLowerBound: result.total_relation === "gte",
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

export const pageRoutes = [catalogRoute, listingRoute, statusRoute, ...adminPageRoutes];
