import type { TObject, TSchema } from "@sinclair/typebox";
import type { Context } from "koa";
import type { ErrorCode } from "../shared/errors.js";
import type { Principal } from "../shared/identity/index.js";

export type Method = "get" | "post" | "put" | "patch" | "delete";

/** The authenticated key: agent, key id and the key's policy (scopes, limits, powers). */
export type AuthState = Principal;

export interface AppState {
  requestId: string;
  auth?: AuthState;
  /** Set when a key_or_admin route was called with the admin key. */
  admin?: boolean;
  /** The JSON request body as received (signed platform calls are verified over these exact bytes). */
  rawBody?: string;
}

export type AppContext = Context & { state: AppState };

/**
 * What a handler receives, after validation against the route's schemas. Handlers annotate the parts
 * they use (`{ body }: { body: Static<typeof ExecuteBody> }`): inferring these from the schemas through
 * a generic defineRoute exceeded TypeScript's instantiation limit.
 */
export interface RouteInput {
  // biome-ignore lint/suspicious/noExplicitAny: narrowed by each handler's annotation
  params: any;
  // biome-ignore lint/suspicious/noExplicitAny: narrowed by each handler's annotation
  query: any;
  // biome-ignore lint/suspicious/noExplicitAny: narrowed by each handler's annotation
  body: any;
  /** What the route's prefetch started, when it has one and it ran (RouteDef.prefetch). */
  // biome-ignore lint/suspicious/noExplicitAny: narrowed by each handler's annotation
  prefetched?: Promise<any>;
}

/** A non-200 answer, or one that sets headers or a non-JSON body. */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly headers: Record<string, string> = {},
    readonly contentType?: string,
  ) {}
}

/**
 * One declaration per route: its guard (auth, params, query, body), its responses and errors, and a
 * short handler that makes one domain call. The router, request validation and the OpenAPI document
 * are all built from these declarations.
 */
export interface RouteDef {
  method: Method;
  /** OpenAPI-style path: /api/execute/status/{invocation_id} */
  path: string;
  summary: string;
  description?: string;
  tag: string;
  /**
   * Keyless routes that write rows (a quote, an agent) are limited per client IP and route to
   * KEYLESS_REQUESTS_PER_MINUTE (429 RATE_LIMITED), so nobody can fill the database anonymously.
   */
  limitPerClient?: boolean;
  /**
   * none; key = an agent's API key; admin = the operator secret ADMIN_API_KEY (404 when unset);
   * key_or_admin = either: an amk_ bearer is an agent's key (state.auth), any other the admin key
   * (state.admin), for reads an owner or the operator may make (a verification order);
   * platform = only the platform's own signed calls (the executions worker calling a hosted tool).
   */
  auth: "none" | "key" | "admin" | "key_or_admin" | "platform";
  params?: TObject;
  query?: TObject;
  body?: TSchema;
  /**
   * Status → TypeBox schema. Typed loosely on purpose: checking a large TObject against TSchema makes
   * TypeScript compute its Static type and hit the instantiation depth limit.
   */
  responses: Record<number, object>;
  contentType?: string;
  errors?: ErrorCode[];
  /**
   * A paid operation's payment terms, published in OpenAPI as `x-payment-info` (x402scan and MPP
   * discovery read it; docs/x402.md "x402 gateway").
   */
  paymentInfo?: Record<string, unknown>;
  /**
   * A read that does not depend on the caller, started from the valid body while the key is looked up
   * (auth "key" only, and only for a well-formed bearer, so a junk request costs no read): one round trip
   * off the request's path. The handler gets the promise as input.prefetched; undefined = nothing to start.
   */
  // biome-ignore lint/suspicious/noExplicitAny: the valid body, narrowed by each route's annotation
  prefetch?(body: any): Promise<unknown> | undefined;
  handle(ctx: AppContext, input: RouteInput): Promise<unknown>;
}

/** Declares a route (an identity function that keeps route modules uniform and type-checked). */
export function defineRoute(def: RouteDef): RouteDef {
  return def;
}

export function koaPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ":$1");
}
