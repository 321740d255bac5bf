import { type Static, Type } from "@sinclair/typebox";
import { getConfig } from "../../shared/config.js";
import { TERMINAL } from "../../shared/db/invocations.js";
import { awaitInvocation, submitExecution } from "../../shared/domain/executions.js";
import { executeResult, invocationStatus, pendingResult } from "../../shared/domain/invocation-view.js";
import { validationError } from "../../shared/errors.js";
import {
  ExecuteBody,
  ExecutePending,
  ExecuteResult,
  IdempotencyKey,
  InvocationStatus,
} from "../../shared/schemas/execute.js";
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
  responses: { 200: ExecuteResult, 202: ExecutePending },
  errors: [
    "UNAUTHORIZED",
    "SCHEMA_VALIDATION_FAILED",
    "LISTING_NOT_FOUND",
    "TEMPORARILY_UNAVAILABLE",
    "IDEMPOTENCY_KEY_IN_USE",
    "IDEMPOTENCY_KEY_REUSED",
    "PROVIDER_FAILED",
    "PROVIDER_UNAVAILABLE",
    "TIMEOUT",
  ],
  async handle(ctx, { body }: { body: Static<typeof ExecuteBody> }) {
    const submission = await submitExecution(
      ctx.state.auth!,
      {
        task: body.task,
        input: body.input,
        maxCostUsdc: body.constraints?.max_cost,
        idempotencyKey: idempotencyKey(ctx, body.idempotency_key),
      },
      ctx.state.requestId,
    );
    if (submission.replayed) ctx.set("Idempotent-Replayed", "true");
    const invocation = await awaitInvocation(submission, getConfig().executeSyncWaitMs);
    if (!TERMINAL.includes(invocation.status))
      return new Reply(202, pendingResult(invocation), { Location: pendingResult(invocation).status_url });
    return executeResult(invocation);
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

export const executeRoutes = [submitRoute, statusRoute];
