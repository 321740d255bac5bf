import type { Next } from "koa";
import { getConfig } from "../../shared/config.js";
import { AppError, validationError } from "../../shared/errors.js";
import type { AppContext } from "../route.js";

/**
 * How deep arrays and objects nest in a parsed value, counted up to `stopAfter` + 1 (enough to refuse).
 * Iterative: the deep bodies this guards against would overflow a recursive walk, here and downstream
 * (schema validation, canonical JSON fingerprints, jsonb).
 */
function jsonDepth(value: unknown, stopAfter: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [item, depth] = stack.pop()!;
    if (!item || typeof item !== "object") continue;
    if (depth > deepest) deepest = depth;
    if (deepest > stopAfter) return deepest;
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * Reads a JSON request body into ctx.request.body, bounded by REQUEST_BODY_MAX_BYTES. Malformed JSON and
 * a non-JSON content type are 400s with a clear message, never 500s. The one exception: the operator
 * pages under /admin/ post HTML forms (application/x-www-form-urlencoded).
 */
export async function jsonBody(ctx: AppContext, next: Next): Promise<void> {
  if (!["POST", "PUT", "PATCH", "DELETE"].includes(ctx.method)) return next();
  const limit = getConfig().requestBodyMaxBytes;
  const declared = Number(ctx.get("content-length") || 0);
  if (declared > limit) throw new AppError("REQUEST_TOO_LARGE", `request body is over ${limit} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new AppError("REQUEST_TOO_LARGE", `request body is over ${limit} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  ctx.state.rawBody = text;
  let body: unknown;
  if (text.trim() !== "" && ctx.path.startsWith("/admin/") && ctx.is("application/x-www-form-urlencoded")) {
    // The operator pages' forms (docs/operations.md "Pages"): fields as strings, validated by the route.
    body = Object.fromEntries(new URLSearchParams(text));
  } else if (text.trim() !== "") {
    if (!ctx.is("application/json", "application/*+json")) {
      throw validationError("request body must be JSON", [
        { path: "/", message: "send Content-Type: application/json" },
      ]);
    }
    try {
      body = JSON.parse(text);
    } catch (error) {
      throw validationError("request body is not valid JSON", [
        { path: "/", message: (error as Error).message },
      ]);
    }
  }
  const maxDepth = getConfig().requestJsonMaxDepth;
  if (jsonDepth(body, maxDepth) > maxDepth) {
    throw validationError("request body is nested too deeply", [
      {
        path: "/",
        message: `arrays and objects may nest at most ${maxDepth} levels (REQUEST_JSON_MAX_DEPTH)`,
      },
    ]);
  }
  (ctx.request as { body?: unknown }).body = body;
  return next();
}
