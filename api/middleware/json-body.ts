import type { Next } from "koa";
import { getConfig } from "../../shared/config.js";
import { AppError, validationError } from "../../shared/errors.js";
import type { AppContext } from "../route.js";

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
  (ctx.request as { body?: unknown }).body = body;
  return next();
}
