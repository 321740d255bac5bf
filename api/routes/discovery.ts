import type { Static, TSchema } from "@sinclair/typebox";
import { Type } from "@sinclair/typebox";
import { stringify } from "yaml";
import { getConfig } from "../../shared/config.js";
import {
  AgentCardSchema,
  CatalogPageQuery,
  DiscoveryCheck,
  DiscoveryDocument,
  DiscoveryIndex,
  type DiscoverySources,
  discoveryCheck,
  discoveryDocumentAt,
  type FetchPath,
  MachineCatalog,
  MarketplaceDescriptor,
  McpServerJsonSchema,
  machineCatalogPage,
  PublicProof,
  type RouteFact,
  type ServedDocument,
} from "../../shared/discovery/index.js";
import { buildOpenApi, plain } from "../openapi.js";
import { type AppContext, defineRoute, Reply, type RouteDef } from "../route.js";

// The fixed discovery paths (docs/discovery.md): OpenAPI, and the documents of the discovery context,
// generated from these same route declarations. Every document answers with an ETag (304 on a match),
// Cache-Control and its media type; HEAD is answered for each GET.

/** The route declarations as the discovery documents describe them (operator routes left out). */
function routeFacts(routes: RouteDef[]): RouteFact[] {
  return routes
    .filter((r) => r.auth !== "admin" && r.auth !== "platform")
    .map((r) => ({
      method: r.method,
      path: r.path,
      summary: r.summary,
      ...(r.description ? { description: r.description } : {}),
      tag: r.tag,
      auth: (r.auth === "key_or_admin" ? "key" : r.auth) as "none" | "key",
      paid: r.paymentInfo !== undefined,
      ...(r.params ? { params: plain(r.params) } : {}),
      ...(r.query ? { query: plain(r.query) } : {}),
      ...(r.body ? { body: plain(r.body) } : {}),
      responses: Object.fromEntries(
        Object.entries(r.responses).map(([s, schema]) => [s, plain(schema as TSchema)]),
      ),
      errors: r.errors ?? [],
    }));
}

const NotModified = Type.Null({ description: "the ETag matched: use the copy you have" });

/** The document as an answer: 304 when the client's ETag matches, else the bytes with their headers. */
function answer(ctx: AppContext, doc: ServedDocument): Reply {
  const headers = {
    ETag: doc.etag,
    "Cache-Control": `public, max-age=${getConfig().discoveryCacheSeconds}`,
  };
  const type = doc.mediaType.split(";")[0]!;
  const tags = (ctx.get("if-none-match") || "").split(",").map((t) => t.trim());
  if (tags.includes(doc.etag) || tags.includes("*")) return new Reply(304, null, headers, type);
  return new Reply(200, doc.body, headers, type);
}

/** A fetch of this service's own paths, through the socket the request arrived on. */
function selfFetch(ctx: AppContext): FetchPath {
  const socket = ctx.req.socket;
  const host =
    socket.localAddress?.includes(":") && !socket.localAddress.startsWith("::ffff:")
      ? `[${socket.localAddress}]`
      : (socket.localAddress ?? "127.0.0.1").replace(/^::ffff:/, "");
  const origin = `http://${host}:${socket.localPort}`;
  return async (path) => {
    const res = await fetch(`${origin}${path}`, { redirect: "manual", signal: AbortSignal.timeout(10_000) });
    return { status: res.status, contentType: res.headers.get("content-type"), body: await res.text() };
  };
}

/** /openapi.json, /openapi.yaml and the discovery documents, built from every declared route. */
export function discoveryRoutes(allRoutes: () => RouteDef[], transports: { mcp: boolean }): RouteDef[] {
  let cached: { json: unknown; yaml: string } | undefined;
  const document = () => {
    if (!cached) {
      const json = buildOpenApi(allRoutes());
      cached = { json, yaml: stringify(json, { aliasDuplicateObjects: false }) };
    }
    return cached;
  };
  // Built on first use, not here: allRoutes() includes these very routes.
  let sources: DiscoverySources | undefined;
  const sourcesOf = (): DiscoverySources => {
    if (!sources) {
      const routes = allRoutes();
      sources = {
        baseUrl: getConfig().publicBaseUrl.replace(/\/$/, ""),
        routes: routeFacts(routes),
        mcp: transports.mcp,
      };
    }
    return sources;
  };
  const served = (
    path: string,
    summary: string,
    schema: TSchema,
    contentType: string,
    tag = "discovery",
  ): RouteDef =>
    defineRoute({
      method: "get",
      path,
      tag,
      summary,
      auth: "none",
      contentType,
      responses: { 200: schema, 304: NotModified },
      async handle(ctx) {
        return answer(ctx, await discoveryDocumentAt(sourcesOf(), path));
      },
    });
  const text = Type.String();
  return [
    defineRoute({
      method: "get",
      path: "/openapi.json",
      tag: "discovery",
      summary: "OpenAPI 3.1 document (JSON)",
      auth: "none",
      responses: { 200: Type.Record(Type.String(), Type.Unknown()) },
      async handle() {
        return document().json;
      },
    }),
    defineRoute({
      method: "get",
      path: "/openapi.yaml",
      tag: "discovery",
      summary: "OpenAPI 3.1 document (YAML)",
      auth: "none",
      contentType: "application/yaml",
      responses: { 200: Type.String() },
      async handle() {
        return new Reply(200, document().yaml, {}, "application/yaml");
      },
    }),
    served(
      "/llms.txt",
      "llms.txt: what this is and the links an agent needs (llmstxt.org)",
      text,
      "text/plain",
    ),
    // The base URL itself, which several documents link as the service's home: the llms.txt index.
    {
      ...served("/llms.txt", "The service's home for agents: the llms.txt index", text, "text/plain"),
      path: "/",
    },
    served(
      "/llms-full.txt",
      "The full agent reference: flows, limits, error codes, every route with its schemas",
      text,
      "text/plain",
    ),
    served("/llms-full.sha256", "sha256sum line of /llms-full.txt", text, "text/plain"),
    served(
      "/agents.txt",
      "A plain-text guide for agents: register, free call, fund, paid call, x402",
      text,
      "text/plain",
    ),
    served(
      "/skill.md",
      "An Agent Skill (YAML front matter, then steps with curl examples)",
      text,
      "text/markdown",
    ),
    served(
      "/.well-known/agent-marketplace.json",
      "The service descriptor: entry points, protocols, networks, fee, keys",
      MarketplaceDescriptor,
      "application/json",
    ),
    served(
      "/.well-known/agent-card.json",
      "A2A v1.0 Agent Card, signed (JWS over the JCS form, key in our JWKS)",
      AgentCardSchema,
      "application/json",
    ),
    served(
      "/api/discovery",
      "Protocols, networks, auth schemes, tools, lanes and entry points",
      DiscoveryDocument,
      "application/json",
    ),
    served(
      "/public-proof.json",
      "Evidence-backed figures from live data, each with when it was computed",
      PublicProof,
      "application/json",
    ),
    served(
      "/api/index.json",
      "Every discovery document with its URL, media type and sha256",
      DiscoveryIndex,
      "application/json",
    ),
    ...(transports.mcp
      ? [
          served(
            "/.well-known/mcp/server.json",
            "MCP registry server.json for our /mcp transport",
            McpServerJsonSchema,
            "application/json",
          ),
        ]
      : []),
    defineRoute({
      method: "get",
      path: "/api/catalog",
      tag: "discovery",
      summary: "Compact machine catalog of public listings: price, input schema and how to invoke, paged",
      auth: "none",
      contentType: "application/json",
      query: CatalogPageQuery,
      responses: { 200: MachineCatalog, 304: NotModified },
      errors: ["SCHEMA_VALIDATION_FAILED"],
      async handle(ctx, { query }: { query: Static<typeof CatalogPageQuery> }) {
        const firstPage = query.lane === undefined && query.limit === undefined && query.offset === undefined;
        return answer(
          ctx,
          firstPage
            ? await discoveryDocumentAt(sourcesOf(), "/api/catalog")
            : await machineCatalogPage(sourcesOf(), query),
        );
      },
    }),
    defineRoute({
      method: "get",
      path: "/api/discovery/check",
      tag: "discovery",
      summary: "Self-check: fetches and validates every discovery document and follows every advertised URL",
      description:
        "Each document: answers 200 with its media type, parses and is valid for its standard, matches the " +
        "sha256 in /api/index.json. Each URL of ours in any document: answers (not 404, not 5xx). Limited " +
        "per client like keyless writes, since one call makes dozens of requests.",
      auth: "none",
      limitPerClient: true,
      responses: { 200: DiscoveryCheck },
      async handle(ctx) {
        return new Reply(200, await discoveryCheck(sourcesOf(), selfFetch(ctx)), {
          "Cache-Control": "no-store",
        });
      },
    }),
  ];
}
