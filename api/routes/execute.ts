import { type Static, Type } from "@sinclair/typebox";
import { type ErrorCode, validationError } from "../../shared/errors.js";
import {
  awaitInvocation,
  awaitingApprovalResult,
  createQuote,
  ExecuteAwaitingApproval,
  ExecuteBody,
  ExecutePending,
  ExecuteResult,
  executeResult,
  IdempotencyKey,
  InvocationStatus,
  InvokeBody,
  invocationStatus,
  isTerminal,
  MatchQuery,
  MatchResult,
  matchProviders,
  pendingResult,
  QuoteBody,
  QuoteCreated,
  QuoteParams,
  QuoteView,
  readQuote,
  readTaskListings,
  type Submission,
  submitExecution,
  submitInvoke,
} from "../../shared/routing/index.js";
import { type AppContext, defineRoute, Reply } from "../route.js";
import { compileValidator } from "../validation.js";

const headerKey = compileValidator(Type.Object({ "x-idempotency-key": IdempotencyKey }), "params");

/** The key from X-Idempotency-Key or the body's idempotency_key; both present must agree. */
function idempotencyKey(ctx: AppContext, bodyKey: string | undefined): string | undefined {
  const header = ctx.get("x-idempotency-key") || undefined;
  if (header !== undefined) headerKey({ "x-idempotency-key": header });
  if (header !== undefined && bodyKey !== undefined && header !== bodyKey) {
    throw validationError("two different idempotency keys", [
      { path: "/idempotency_key", message: "differs from the X-Idempotency-Key header" },
    ]);
  }
  return header ?? bodyKey;
}

/**
 * The bounded wait, then 200 with the result, the error of a failed run, or 202 with the status URL
 * (and, for a purchase held for approval, the approval and what happens next).
 */
async function answer(ctx: AppContext, submission: Submission) {
  if (submission.replayed) ctx.set("Idempotent-Replayed", "true");
  const invocation = await awaitInvocation(
    submission.invocation.id,
    submission.replayed ? undefined : submission.completion,
  );
  if (isTerminal(invocation)) return executeResult(invocation);
  if (invocation.status === "awaiting_approval") {
    const held = await awaitingApprovalResult(invocation.id);
    return new Reply(202, held, { Location: held.status_url });
  }
  const pending = pendingResult(invocation);
  return new Reply(202, pending, { Location: pending.status_url });
}

/** What a submitted run can answer, for execute and direct invoke alike. */
const RUN_ERRORS: ErrorCode[] = [
  "UNAUTHORIZED",
  "SCHEMA_VALIDATION_FAILED",
  "LISTING_NOT_FOUND",
  "RATE_LIMITED",
  "TEMPORARILY_UNAVAILABLE",
  "IDEMPOTENCY_KEY_IN_USE",
  "IDEMPOTENCY_KEY_REUSED",
  "PROVIDER_FAILED",
  "PROVIDER_UNAVAILABLE",
  "TIMEOUT",
  "POLICY_BLOCKED",
  "WALLET_LIMIT_EXCEEDED",
  "PAYMENT_REQUIRED",
  "SELF_DEALING_FORBIDDEN",
  "QUOTE_NOT_USABLE",
  "NOT_FOUND",
];

/** 202: still queued or running, or held for a supervisor's approval (docs/payments.md "Approvals"). */
const Accepted = Type.Union([ExecutePending, ExecuteAwaitingApproval]);

const StatusParams = Type.Object({ invocation_id: Type.String({ maxLength: 100 }) });

const submitRoute = defineRoute({
  method: "post",
  path: "/api/execute",
  tag: "routing",
  summary: "Route a task to a provider; waits a bounded time for the result, else 202",
  description:
    "Idempotency: X-Idempotency-Key header or body idempotency_key. A replay returns the original outcome " +
    "(header Idempotent-Replayed: true); a different payload → 422; while the first runs → 409.",
  auth: "key",
  body: ExecuteBody,
  responses: { 200: ExecuteResult, 202: Accepted },
  errors: RUN_ERRORS,
  // A quoted execute reads its quote's listing instead.
  // The reads start in this call; the promise only carries them to the handler.
  prefetch: (body: Static<typeof ExecuteBody>) =>
    body.quote_id ? undefined : Promise.resolve(readTaskListings(body.task)),
  async handle(
    ctx,
    {
      body,
      prefetched,
    }: { body: Static<typeof ExecuteBody>; prefetched?: Promise<ReturnType<typeof readTaskListings>> },
  ) {
    const submission = await submitExecution(
      ctx.state.auth!,
      {
        task: body.task,
        input: body.input,
        maxCostUsdc: body.constraints?.max_cost,
        idempotencyKey: idempotencyKey(ctx, body.idempotency_key),
        quoteId: body.quote_id,
        taskListings: await prefetched,
      },
      ctx.state.requestId,
    );
    return answer(ctx, submission);
  },
});

const statusRoute = defineRoute({
  method: "get",
  path: "/api/execute/status/{invocation_id}",
  tag: "routing",
  summary: "Execution status, every attempt, and the separately recorded settlement state",
  auth: "key",
  params: StatusParams,
  responses: { 200: InvocationStatus },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof StatusParams> }) {
    return invocationStatus(ctx.state.auth!.agentId, params.invocation_id);
  },
});

const matchRoute = defineRoute({
  method: "get",
  path: "/api/execute/match",
  tag: "routing",
  summary: "Ranked eligible providers for a task, with the score components that ranked them",
  description:
    "Listings outside the calling key's scopes are in excluded with the scope as the reason " +
    "(outside_key_categories, over_key_price_ceiling, seller_not_in_key_allowlist, seller_in_key_blocklist).",
  auth: "key",
  query: MatchQuery,
  responses: { 200: MatchResult },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { query }: { query: Static<typeof MatchQuery> }) {
    return matchProviders(query.task, query.max_cost, ctx.state.auth!);
  },
});

const InvokeParams = Type.Object({ listing_id: Type.String({ maxLength: 100 }) });

const invokeRoute = defineRoute({
  method: "post",
  path: "/api/invoke/{listing_id}",
  tag: "routing",
  summary: "Invoke one listing directly: no fallback; same idempotency, limits and evidence as execute",
  auth: "key",
  params: InvokeParams,
  body: InvokeBody,
  responses: { 200: ExecuteResult, 202: Accepted },
  errors: [...RUN_ERRORS, "LISTING_NOT_INVOCABLE"],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof InvokeParams>; body: Static<typeof InvokeBody> },
  ) {
    const submission = await submitInvoke(
      ctx.state.auth!,
      params.listing_id,
      {
        input: body.input,
        maxCostUsdc: body.max_cost,
        idempotencyKey: idempotencyKey(ctx, body.idempotency_key),
        quoteId: body.quote_id,
      },
      ctx.state.requestId,
    );
    return answer(ctx, submission);
  },
});

const quoteRoute = defineRoute({
  method: "post",
  path: "/api/quotes",
  tag: "routing",
  summary:
    "Quote one listing: a binding price until expires_at, with the fee split, payment options and checks",
  description:
    "Body {listing_id, input?, max_cost?}. Pay it with POST /api/invoke/{listing_id} or POST /api/execute " +
    "(its task) carrying quote_id: the quoted price is held and charged even if the listing's price changes. " +
    "A quote pays one call; used or expired → 409 QUOTE_NOT_USABLE; another agent's → 404.",
  auth: "key",
  body: QuoteBody,
  responses: { 201: QuoteCreated },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "LISTING_NOT_FOUND",
    "LISTING_NOT_INVOCABLE",
    "POLICY_BLOCKED",
    "SELF_DEALING_FORBIDDEN",
    "TEMPORARILY_UNAVAILABLE",
  ],
  async handle(ctx, { body }: { body: Static<typeof QuoteBody> }) {
    const quote = await createQuote(ctx.state.auth!, {
      listingId: body.listing_id,
      input: body.input,
      maxCostUsdc: body.max_cost,
    });
    return new Reply(201, quote, { Location: `/api/quotes/${quote.quote_id}` });
  },
});

const readQuoteRoute = defineRoute({
  method: "get",
  path: "/api/quotes/{quote_id}",
  tag: "routing",
  summary: "One quote (ledger, x402 or sandbox) with its status: open, used or expired",
  auth: "key",
  params: QuoteParams,
  responses: { 200: QuoteView },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof QuoteParams> }) {
    return readQuote(ctx.state.auth!, params.quote_id);
  },
});

export const executeRoutes = [submitRoute, statusRoute, matchRoute, invokeRoute, quoteRoute, readQuoteRoute];
