import type { AddressInfo } from "node:net";
import Koa from "koa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errors } from "../../api/middleware/errors.js";
import { requestId } from "../../api/middleware/request-id.js";
import { AppError, ERROR_CODES, ERRORS, type ErrorCode, type ErrorSpec } from "../../shared/errors.js";

// A tiny app with the real request-id and error middleware: /code/<CODE> throws that AppError,
// /crash throws a plain Error carrying something that must not leak.
const SECRET = "password=hunter2 at db.internal:5432";
let server: ReturnType<Koa["listen"]>;
let base: string;

beforeAll(async () => {
  const app = new Koa();
  app.silent = true;
  app.use(requestId as unknown as Koa.Middleware);
  app.use(errors as unknown as Koa.Middleware);
  app.use(async (ctx) => {
    const match = /^\/code\/([A-Z_]+)$/.exec(ctx.path);
    if (match) throw new AppError(match[1] as ErrorCode, "msg", { x: 1 });
    if (ctx.path === "/crash") throw new Error(SECRET);
    ctx.body = { ok: true };
  });
  server = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function get(path: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, { headers });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe("error envelope", () => {
  it.each(ERROR_CODES)("AppError %s renders its status, envelope and Retry-After", async (code) => {
    const spec: ErrorSpec = ERRORS[code];
    const res = await get(`/code/${code}`);
    expect(res.status).toBe(spec.status);
    expect(res.headers.get("content-type")).toContain("application/json");
    const requestIdHeader = res.headers.get("x-request-id");
    expect(requestIdHeader).toBeTruthy();
    expect(res.body).toEqual({
      success: false,
      error: {
        code,
        message: "msg",
        retryable: spec.retryable,
        buyer_action: spec.buyerAction,
        fallback: spec.fallback,
        request_id: requestIdHeader,
        details: { x: 1 },
      },
    });
    if (spec.retryAfterSeconds === undefined) expect(res.headers.get("retry-after")).toBeNull();
    else expect(res.headers.get("retry-after")).toBe(String(spec.retryAfterSeconds));
  });

  it("the spec's twelve invocation codes keep the spec's status, retryability, buyer action and fallback", () => {
    const table: [ErrorCode, number, boolean, string, string][] = [
      ["LISTING_NOT_FOUND", 404, false, "choose_alternative_provider", "call_execute_match"],
      ["UNAUTHORIZED", 401, true, "supply_valid_bearer_token", "quickstart_or_refresh_api_key"],
      [
        "PAYMENT_REQUIRED",
        402,
        true,
        "fund_wallet_or_sign_x402_retry",
        "use_free_listing_or_match_alternative",
      ],
      [
        "WALLET_LIMIT_EXCEEDED",
        429,
        false,
        "raise_limit_or_request_supervisor_approval",
        "call_execute_with_lower_max_cost",
      ],
      ["RATE_LIMITED", 429, true, "respect_retry_after_or_reduce_request_rate", "retry_later"],
      ["SCHEMA_VALIDATION_FAILED", 400, false, "repair_input_against_input_schema", "inspect_input_contract"],
      [
        "POLICY_BLOCKED",
        403,
        false,
        "request_supervisor_approval_or_change_policy",
        "choose_allowed_provider",
      ],
      ["LISTING_NOT_INVOCABLE", 422, false, "choose_alternative_provider", "call_execute_match"],
      [
        "PROVIDER_UNAVAILABLE",
        503,
        true,
        "retry_with_idempotency_key_or_call_execute_for_fallback",
        "call_execute_match",
      ],
      ["PROVIDER_FAILED", 502, true, "retry_or_select_alternative_provider", "call_execute_match"],
      ["TIMEOUT", 504, true, "retry_with_idempotency_key_or_reduce_request_size", "call_execute_match"],
      [
        "RECEIPT_UNAVAILABLE",
        503,
        true,
        "retry_receipt_lookup_or_use_invocation_status",
        "check_status_endpoint",
      ],
    ];
    for (const [code, status, retryable, buyerAction, fallback] of table) {
      const spec: ErrorSpec = ERRORS[code];
      expect({ ...spec, retryable: spec.specRetryable ?? spec.retryable }, code).toMatchObject({
        status,
        retryable,
        buyerAction,
        fallback,
      });
    }
  });

  it("every code's envelope says retryable only when repeating the same request may succeed", () => {
    // code → what the envelope's `retryable` says, and why. Every code of ERRORS must be here.
    const table: Record<ErrorCode, [boolean, string]> = {
      LISTING_NOT_FOUND: [false, "the catalog will not change because the request is repeated"],
      UNAUTHORIZED: [
        false,
        "the same request carries the same missing or bad key (the spec says yes: see docs/api.md)",
      ],
      PAYMENT_REQUIRED: [true, "the same call succeeds once funded or with an x402 payment attached"],
      WALLET_LIMIT_EXCEEDED: [false, "the limit stands until a person raises it"],
      RATE_LIMITED: [true, "after Retry-After"],
      SCHEMA_VALIDATION_FAILED: [false, "the same input fails the same schema"],
      POLICY_BLOCKED: [false, "the policy stands until changed"],
      LISTING_NOT_INVOCABLE: [false, "the listing's state does not change by asking again"],
      PROVIDER_UNAVAILABLE: [true, "a provider outage is transient"],
      PROVIDER_FAILED: [true, "a provider failure may be transient"],
      TIMEOUT: [true, "a slow call may be fast next time"],
      RECEIPT_UNAVAILABLE: [true, "the receipt is written shortly"],
      TEMPORARILY_UNAVAILABLE: [true, "paid execution comes back when the operator reopens it"],
      IDEMPOTENCY_KEY_IN_USE: [true, "the first request finishes"],
      IDEMPOTENCY_KEY_REUSED: [false, "the key stays bound to its first payload"],
      CONFLICT: [false, "the state it contradicts stays"],
      QUOTE_NOT_USABLE: [false, "a used or expired quote stays so"],
      WALLET_CHALLENGE_INVALID: [false, "the same challenge stays invalid"],
      WALLET_SIGNATURE_INVALID: [false, "the same signature recovers the same address"],
      WALLET_NOT_LINKED: [false, "linking is a separate step"],
      SELF_DEALING_FORBIDDEN: [false, "the listing stays the caller's own"],
      NOT_FOUND: [false, "an unknown id stays unknown"],
      METHOD_NOT_ALLOWED: [false, "the route does not gain the method"],
      REQUEST_TOO_LARGE: [false, "the same body stays too large"],
      HEADERS_TOO_LARGE: [false, "the same URL and headers stay too large"],
      SERVICE_UNAVAILABLE: [true, "a dependency outage is transient"],
      INTERNAL_ERROR: [true, "an unexpected failure may not recur"],
    };
    expect(Object.keys(table).sort()).toEqual(Object.keys(ERRORS).sort());
    for (const [code, [retryable, why]] of Object.entries(table))
      expect(ERRORS[code as ErrorCode].retryable, `${code}: ${why}`).toBe(retryable);
  });

  it("echoes a sane caller X-Request-Id in the header and the envelope", async () => {
    const res = await get("/code/NOT_FOUND", { "x-request-id": "caller-req-0001" });
    expect(res.headers.get("x-request-id")).toBe("caller-req-0001");
    expect(res.body.error.request_id).toBe("caller-req-0001");
  });

  it("replaces an unsafe caller X-Request-Id with its own", async () => {
    const res = await get("/code/NOT_FOUND", { "x-request-id": "bad id with spaces" });
    const id = res.headers.get("x-request-id");
    expect(id).not.toBe("bad id with spaces");
    expect(res.body.error.request_id).toBe(id);
  });

  it("a plain Error becomes 500 INTERNAL_ERROR without leaking its message", async () => {
    const res = await get("/crash");
    expect(res.status).toBe(500);
    expect(res.body.success).toBe(false);
    expect(res.body.error).toMatchObject({
      code: "INTERNAL_ERROR",
      retryable: ERRORS.INTERNAL_ERROR.retryable,
      buyer_action: ERRORS.INTERNAL_ERROR.buyerAction,
      fallback: ERRORS.INTERNAL_ERROR.fallback,
      request_id: res.headers.get("x-request-id"),
    });
    expect(res.body.error.message).not.toContain("hunter2");
    expect(JSON.stringify(res.body)).not.toContain(SECRET);
    expect(res.body.error.details).toBeUndefined();
  });

  it("a request no handler answers is 404 NOT_FOUND", async () => {
    const app = new Koa();
    app.silent = true;
    app.use(requestId as unknown as Koa.Middleware);
    app.use(errors as unknown as Koa.Middleware);
    const other = app.listen(0, "127.0.0.1");
    await new Promise<void>((resolve) => other.once("listening", resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(other.address() as AddressInfo).port}/nowhere`);
      const body = (await res.json()) as any;
      expect(res.status).toBe(404);
      expect(body.error.code).toBe("NOT_FOUND");
      expect(body.error.request_id).toBe(res.headers.get("x-request-id"));
    } finally {
      other.closeAllConnections();
      await new Promise((resolve) => other.close(resolve));
    }
  });
});
