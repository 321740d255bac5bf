// What every discovery document is generated from (docs/discovery.md): the route declarations (handed in
// by the API, which owns them), the configuration and live data read at request time. No document is a
// hand-kept copy: change a route, a price or the base URL and every document follows.

/** One declared route as the documents describe it. Operator (admin) routes are left out by the API. */
export interface RouteFact {
  method: "get" | "post" | "put" | "patch" | "delete";
  /** OpenAPI-style path, e.g. /api/execute/status/{invocation_id}. */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  auth: "none" | "key";
  /** Paid at the x402 edge (a 402 challenge, then a signed payment on the retry). */
  paid: boolean;
  /** JSON Schemas of the request parts and responses, as the OpenAPI document has them. */
  params?: unknown;
  query?: unknown;
  body?: unknown;
  responses: Record<string, unknown>;
  errors: string[];
}

/** The inputs of every document. */
export interface DiscoverySources {
  /** PUBLIC_BASE_URL without a trailing slash. */
  baseUrl: string;
  routes: RouteFact[];
  /** The MCP transport is mounted at /mcp (its documents are served only then). */
  mcp: boolean;
}

/** An absolute URL of ours. */
export function urlOf(sources: Pick<DiscoverySources, "baseUrl">, path: string): string {
  return `${sources.baseUrl}${path}`;
}

/** True when the API declares this method and path (documents link only to what exists). */
export function hasRoute(sources: DiscoverySources, method: RouteFact["method"], path: string): boolean {
  return sources.routes.some((r) => r.method === method && r.path === path);
}
