import type { Next } from "koa";
import { AppError, ERRORS, type ErrorCode } from "../../shared/errors.js";
import { logger } from "../../shared/log.js";
import type { AppContext } from "../route.js";

/** Renders an AppError as the one error envelope (docs/api.md "Error envelope"). */
function renderError(ctx: AppContext, error: AppError): void {
  const { spec } = error;
  ctx.status = spec.status;
  // An error that knows when to come back (a rate window's end) says so; else the table's default.
  const retryAfter = error.details?.retry_after_seconds ?? spec.retryAfterSeconds;
  if (typeof retryAfter === "number") ctx.set("Retry-After", String(retryAfter));
  for (const [name, value] of Object.entries(error.headers ?? {})) ctx.set(name, value);
  ctx.body = {
    success: false,
    error: {
      code: error.code,
      message: error.message,
      retryable: spec.retryable,
      buyer_action: spec.buyerAction,
      fallback: spec.fallback,
      request_id: ctx.state.requestId,
      ...(error.details ? { details: error.details } : {}),
    },
  };
}

function fromHttpError(error: { status: number; message: string; expose?: boolean }): AppError {
  const byStatus: Record<number, ErrorCode> = {
    400: "SCHEMA_VALIDATION_FAILED",
    401: "UNAUTHORIZED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_TOO_LARGE",
  };
  const code = byStatus[error.status] ?? "SCHEMA_VALIDATION_FAILED";
  return new AppError(code, error.expose ? error.message : ERRORS[code].buyerAction);
}

/**
 * The only place an error becomes HTTP. Known errors keep their code; client errors raised by Koa keep
 * their status class; anything else is logged and hidden behind a plain INTERNAL_ERROR.
 */
export async function errors(ctx: AppContext, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) {
      throw new AppError("NOT_FOUND", `no route for ${ctx.method} ${ctx.path}`, { see: "/openapi.json" });
    }
    if ((ctx.status === 405 || ctx.status === 501) && !ctx.body) {
      throw new AppError("METHOD_NOT_ALLOWED", `${ctx.method} is not allowed here`, {
        allow: ctx.response.get("Allow"),
      });
    }
  } catch (error) {
    if (error instanceof AppError) return renderError(ctx, error);
    const status = (error as { status?: unknown }).status;
    if (typeof status === "number" && status >= 400 && status < 500) {
      return renderError(ctx, fromHttpError(error as { status: number; message: string; expose?: boolean }));
    }
    logger().error({ err: error, request_id: ctx.state.requestId }, "unhandled error");
    renderError(
      ctx,
      new AppError("INTERNAL_ERROR", "internal error; the request id identifies it in our logs"),
    );
  }
}
