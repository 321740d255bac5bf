import { type Static, Type } from "@sinclair/typebox";
import { validationError } from "../../shared/errors.js";
import {
  AttestationParams,
  AttestationView,
  cancelMonitoring,
  createMonitoring,
  createOrder,
  MonitoringBody,
  OrderBody,
  OrderParams,
  type OrderSubmission,
  OrderView,
  orderView,
  RerunBody,
  readAttestation,
  readOrder,
  rerunOrder,
  SubscriptionParams,
  SubscriptionView,
  Surface,
  subscriptionView,
  VerificationIdempotencyKey,
  VerifyBody,
  VerifyResult,
  verificationSurface,
  verifyAttestation,
} from "../../shared/verification/index.js";
import { type AppContext, defineRoute, Reply } from "../route.js";
import { compileValidator } from "../validation.js";

// The verification service (docs/verification.md; interface-spec "Verification service"). Orders and
// monitoring are the buyer's (anyone else: 404); an order is also readable by the admin key; attestation
// reads and verification are public.

const headerKey = compileValidator(
  Type.Object({ "x-idempotency-key": VerificationIdempotencyKey }),
  "params",
);

/** X-Idempotency-Key or Idempotency-Key header, or the body's idempotency_key; all given must agree. */
function idempotencyKey(ctx: AppContext, bodyKey: string | undefined): string | undefined {
  const header = ctx.get("x-idempotency-key") || ctx.get("idempotency-key") || undefined;
  if (header !== undefined) headerKey({ "x-idempotency-key": header });
  if (header !== undefined && bodyKey !== undefined && header !== bodyKey)
    throw validationError("two different idempotency keys", [
      { path: "/idempotency_key", message: "differs from the idempotency key header" },
    ]);
  return header ?? bodyKey;
}

async function accepted(submission: OrderSubmission): Promise<Reply> {
  const view = await orderView(submission.order);
  const headers: Record<string, string> = { Location: view.status_url };
  if (submission.replayed) headers["Idempotent-Replayed"] = "true";
  return new Reply(202, view, headers);
}

const PAID_ERRORS = [
  "UNAUTHORIZED",
  "SCHEMA_VALIDATION_FAILED",
  "PAYMENT_REQUIRED",
  "TEMPORARILY_UNAVAILABLE",
  "IDEMPOTENCY_KEY_REUSED",
  "WALLET_LIMIT_EXCEEDED",
  "NOT_FOUND",
] as const;

const surface = defineRoute({
  method: "get",
  path: "/api/verification",
  tag: "verification",
  summary:
    "The verification service's surface descriptor: routes, price, protocols, verdicts, signing, safety",
  auth: "none",
  responses: { 200: Surface },
  handle: () => verificationSurface(),
});

const create = defineRoute({
  method: "post",
  path: "/api/verification/orders",
  tag: "verification",
  summary: "Order a probe of an endpoint (http-json, x402 or mcp): 5 USDC held now, 202 with the order",
  description:
    "Captured when the probe ran, whatever the verdict; released when it could not run through our fault. " +
    "Idempotency: X-Idempotency-Key (or Idempotency-Key) header or body idempotency_key; a replay answers the " +
    "same order with Idempotent-Replayed: true, a different request under the key → 422.",
  auth: "key",
  body: OrderBody,
  responses: { 202: OrderView },
  errors: [...PAID_ERRORS, "LISTING_NOT_FOUND"],
  async handle(ctx, { body }: { body: Static<typeof OrderBody> }) {
    const submission = await createOrder(
      ctx.state.auth!,
      {
        target: body.target,
        protocol: body.protocol,
        ...(body.listing_id ? { listing_id: body.listing_id } : {}),
      },
      idempotencyKey(ctx, body.idempotency_key),
      ctx.state.requestId,
    );
    return accepted(submission);
  },
});

const read = defineRoute({
  method: "get",
  path: "/api/verification/orders/{order_id}",
  tag: "verification",
  summary: "An order with its verdict, checks, attestation link and money: its buyer or the admin key only",
  auth: "key_or_admin",
  params: OrderParams,
  responses: { 200: OrderView },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof OrderParams> }) {
    const reader = ctx.state.admin ? { admin: true as const } : { agentId: ctx.state.auth!.agentId };
    return orderView(await readOrder(reader, params.order_id));
  },
});

const rerun = defineRoute({
  method: "post",
  path: "/api/verification/orders/{order_id}/rerun",
  tag: "verification",
  summary:
    "Probe the same target again: a new order, charged again, with a new attestation (the old one is kept)",
  auth: "key",
  params: OrderParams,
  body: RerunBody,
  responses: { 202: OrderView },
  errors: [...PAID_ERRORS],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof OrderParams>; body: Static<typeof RerunBody> },
  ) {
    const submission = await rerunOrder(
      ctx.state.auth!,
      params.order_id,
      idempotencyKey(ctx, body.idempotency_key),
      ctx.state.requestId,
    );
    return accepted(submission);
  },
});

const attestation = defineRoute({
  method: "get",
  path: "/api/verification/attestations/{attestation_id}",
  tag: "verification",
  summary: "A signed attestation (public; the target redacted): the JWS, its kid and the attestation",
  auth: "none",
  params: AttestationParams,
  responses: { 200: AttestationView },
  errors: ["NOT_FOUND"],
  handle: (_ctx, { params }: { params: Static<typeof AttestationParams> }) =>
    readAttestation(params.attestation_id),
});

const verify = defineRoute({
  method: "post",
  path: "/api/verification/attestations/verify",
  tag: "verification",
  summary: "Verify an attestation: {jws} or {attestation} → valid, reason, kid, verdict (public)",
  description:
    "Reasons: malformed, unsupported_algorithm, unknown_key, bad_signature, tampered (the attestation given is " +
    "not what was signed), expired, not_found. Anyone can do the same with the JWKS at /.well-known/jwks.json.",
  auth: "none",
  body: VerifyBody,
  responses: { 200: VerifyResult },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  handle: (_ctx, { body }: { body: Static<typeof VerifyBody> }) => verifyAttestation(body),
});

const monitor = defineRoute({
  method: "post",
  path: "/api/verification/orders/{order_id}/monitoring",
  tag: "verification",
  summary: "Monitor an order's target every `interval` seconds, each run a separate 5 USDC charge",
  description:
    "Runs come from a job scheduler only when VERIFICATION_MONITORING_SCHEDULER is on (off by default; the " +
    "surface says monitoring_scheduler_enabled). A run that cannot be paid pauses the subscription with a reason.",
  auth: "key",
  params: OrderParams,
  body: MonitoringBody,
  responses: { 201: SubscriptionView },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED", "NOT_FOUND", "TEMPORARILY_UNAVAILABLE"],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof OrderParams>; body: Static<typeof MonitoringBody> },
  ) {
    const subscription = await createMonitoring(ctx.state.auth!, params.order_id, body.interval);
    return new Reply(201, await subscriptionView(subscription));
  },
});

const cancel = defineRoute({
  method: "post",
  path: "/api/verification/monitoring/{subscription_id}/cancel",
  tag: "verification",
  summary: "Cancel a monitoring subscription (final; no further runs or charges)",
  auth: "key",
  params: SubscriptionParams,
  responses: { 200: SubscriptionView },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof SubscriptionParams> }) {
    return subscriptionView(await cancelMonitoring(ctx.state.auth!, params.subscription_id));
  },
});

export const verificationRoutes = [surface, create, read, rerun, attestation, verify, monitor, cancel];
