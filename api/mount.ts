import type Router from "@koa/router";
import type { TSchema } from "@sinclair/typebox";
import { getConfig } from "../shared/config.js";
import {
  authenticate,
  authenticateAdmin,
  bearerIsWellFormed,
  countClientRequest,
} from "../shared/identity/index.js";
import { EncodedJson } from "../shared/kernel/encoded-json.js";
import { verifyPlatformCall } from "../shared/routing/index.js";
import { type AppContext, koaPath, Reply, type RouteDef } from "./route.js";
import { compileResponseCheck, compileValidator } from "./validation.js";

/** An amk_ bearer is an agent's key; any other bearer must be the admin key (404 when none is set). */
async function authenticateKeyOrAdmin(c: AppContext): Promise<void> {
  const header = c.get("authorization") || undefined;
  if (header && /^Bearer\s+amk_/i.test(header)) {
    c.state.auth = await authenticate(header);
    return;
  }
  if (!getConfig().adminApiKey) {
    c.state.auth = await authenticate(header);
    return;
  }
  authenticateAdmin(header);
  c.state.admin = true;
}

function requestBody(c: AppContext): unknown {
  return (c.request as { body?: unknown }).body ?? {};
}

/**
 * A route's prefetch, started before its auth guard: the body is validated first, and an invalid body
 * (or a bearer that is not a well-formed key) starts nothing. The body's verdict is kept for its usual
 * turn, after auth and params/query, so a request's errors come in the same order as without it.
 */
function startPrefetch(
  def: RouteDef,
  validate: (value: unknown) => unknown,
  c: AppContext,
): { body(): unknown; prefetched: Promise<unknown> | undefined } | undefined {
  if (def.auth !== "key" || !bearerIsWellFormed(c.get("authorization") || undefined)) return undefined;
  let valid: unknown;
  try {
    valid = validate(requestBody(c));
  } catch (error) {
    return {
      body() {
        throw error;
      },
      prefetched: undefined,
    };
  }
  const prefetched = def.prefetch!(valid);
  // Awaited by the handler, or never if auth refuses: a failure must not go unhandled meanwhile.
  prefetched?.catch(() => {});
  return { body: () => valid, prefetched };
}

/** Mounts declared routes: auth guard, then params/query/body validation, then the handler. */
export function mountRoutes(router: Router, routes: RouteDef[]): void {
  const checkResponses = getConfig().validateResponses;
  for (const def of routes) {
    const params = def.params ? compileValidator(def.params, "params") : undefined;
    const query = def.query ? compileValidator(def.query, "query") : undefined;
    const body = def.body ? compileValidator(def.body, "body") : undefined;
    const checks = new Map(
      Object.entries(def.responses).map(([s, schema]) => [
        Number(s),
        compileResponseCheck(schema as TSchema),
      ]),
    );

    router[def.method](koaPath(def.path), async (ctx) => {
      const c = ctx as unknown as AppContext;
      const early = def.prefetch && body ? startPrefetch(def, body, c) : undefined;
      if (def.auth === "key") c.state.auth = await authenticate(c.get("authorization") || undefined);
      if (def.auth === "admin") authenticateAdmin(c.get("authorization") || undefined);
      if (def.auth === "key_or_admin") await authenticateKeyOrAdmin(c);
      if (def.auth === "platform") await verifyPlatformCall(c.headers, c.state.rawBody ?? "");
      if (def.limitPerClient) await countClientRequest(`${def.method}:${def.path}`, c.ip);
      const input = {
        params: params ? params({ ...ctx.params }) : undefined,
        query: query ? query({ ...ctx.query }) : undefined,
        body: early ? early.body() : body ? body(requestBody(c)) : undefined,
        prefetched: early?.prefetched,
      };
      const result = await def.handle(c, input as never);
      const reply = result instanceof Reply ? result : new Reply(200, result);
      // A body the context encoded itself (kept parts) goes out as its bytes, checked as what it decodes to.
      const encoded = reply.body instanceof EncodedJson ? reply.body : undefined;
      if (checkResponses && reply.contentType === undefined) {
        const problem = checks.get(reply.status)?.(encoded ? encoded.parse() : reply.body);
        if (problem)
          throw new Error(
            `${def.method.toUpperCase()} ${def.path} ${reply.status} breaks its schema: ${problem}`,
          );
      }
      c.status = reply.status;
      for (const [name, value] of Object.entries(reply.headers)) c.set(name, value);
      if (reply.contentType) c.type = reply.contentType;
      if (encoded) sendParts(c, encoded);
      else c.body = reply.body;
    });
  }
}

/**
 * Sends a body the context encoded as parts (kept listing records) as those parts, corked into one write,
 * instead of joining them. Koa takes one Buffer (a fresh one of the whole document per answer: 2.8 MB for
 * a catalog page of 100, allocated, filled and faulted in each time) or a stream (piped part by part,
 * waiting for a drain after each part past its 16 KB mark); docs/benchmarks.md "The thirty-ninth round".
 * What Koa would send is already on the response: Koa sets status and headers on it as they are set, and
 * Node sends no body to a HEAD request.
 */
function sendParts(c: AppContext, encoded: EncodedJson): void {
  c.type = "application/json";
  c.length = encoded.byteLength;
  c.respond = false;
  c.res.cork();
  for (const part of encoded.parts) c.res.write(part);
  c.res.end();
}
