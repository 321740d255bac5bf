import { ERRORS, type ErrorSpec } from "../../errors.js";
import type { Basis } from "./basis.js";
import { ROUTER_MAX_ATTEMPTS } from "./basis.js";
import type { Completeness, ReadinessChecks } from "./completeness.js";
import { exampleFromSchema } from "./schema-examples.js";
import type { Telemetry } from "./telemetry.js";
import { explained, isoOrNull, nullReason } from "./values.js";

/**
 * The public invocation contract: everything an agent needs to call the listing correctly, retry it
 * safely and recover from each failure, stated from the listing's facts and the platform's rules.
 */

/** The twelve failure modes the spec declares for invocation, in its order. */
export const SPEC_FAILURE_CODES = [
  "LISTING_NOT_FOUND",
  "UNAUTHORIZED",
  "PAYMENT_REQUIRED",
  "WALLET_LIMIT_EXCEEDED",
  "RATE_LIMITED",
  "SCHEMA_VALIDATION_FAILED",
  "POLICY_BLOCKED",
  "LISTING_NOT_INVOCABLE",
  "PROVIDER_UNAVAILABLE",
  "PROVIDER_FAILED",
  "TIMEOUT",
  "RECEIPT_UNAVAILABLE",
] as const satisfies readonly (keyof typeof ERRORS)[];

/**
 * failure_modes straight from the ERRORS table: the spec's declared values (its `retryable`), and where
 * the envelope answers otherwise for a request repeated unchanged, that value as `envelope_retryable`.
 * The same for every listing, so built once and frozen: every record shares it (a page of a hundred
 * built twelve objects a record for it; docs/benchmarks.md "The thirty-seventh round").
 */
const FAILURE_MODES = Object.freeze(
  SPEC_FAILURE_CODES.map((code) =>
    Object.freeze({
      code,
      http_status: ERRORS[code].status,
      retryable: specRetryable(code),
      ...(specRetryable(code) !== ERRORS[code].retryable
        ? { envelope_retryable: ERRORS[code].retryable }
        : {}),
      buyer_action: ERRORS[code].buyerAction,
      fallback: ERRORS[code].fallback,
    }),
  ),
);

function specRetryable(code: (typeof SPEC_FAILURE_CODES)[number]): boolean {
  const spec: ErrorSpec = ERRORS[code];
  return spec.specRetryable ?? spec.retryable;
}

function lifecycleState(b: Basis): string {
  if (b.facts.listing.status !== "active") return "retired";
  if (!b.registryVisible) return "withheld";
  if (b.paidBlocker) return "paid_execution_unavailable";
  return "public_live";
}

/** Provider calls per invocation: the router retries only listings that are safe to retry. */
export function maxAttempts(b: Basis): number {
  return b.facts.listing.safe_to_retry ? ROUTER_MAX_ATTEMPTS : 1;
}

/** The retry guidance sentence(s) shown in retry_policy and buyer_evidence. */
export function retryGuidance(b: Basis): string {
  const parts: string[] = [];
  if (b.paidBlocker) {
    parts.push(
      `Paid execution is unavailable (${b.paidUnavailableReason}): do not call, sign ` +
        "or retry paid routes; read /market.json first.",
    );
  }
  if (b.facts.listing.safe_to_retry) {
    parts.push(
      `The router makes up to ${ROUTER_MAX_ATTEMPTS} provider attempts per invocation. Retry PROVIDER_UNAVAILABLE ` +
        "and TIMEOUT with the same X-Idempotency-Key; a replay returns the original outcome.",
    );
  } else {
    parts.push(
      "Not safe to retry: the router calls the provider at most once per invocation. After TIMEOUT or " +
        "PROVIDER_UNAVAILABLE poll /api/execute/status/{invocation_id} instead of resending; resend only " +
        "with the same X-Idempotency-Key.",
    );
  }
  return parts.join(" ");
}

function exampleRequest(b: Basis) {
  const { listing, baseUrl } = b.facts;
  const input = b.exampleInput.value;
  const maxCost = b.requiresPayment ? Number(b.unitPriceUsdc) : undefined;
  const auth = { Authorization: "Bearer <API_KEY>" };
  const json = { Authorization: auth.Authorization, "Content-Type": "application/json" };
  return {
    match: { method: "GET", path: b.paths.match, url: `${baseUrl}${b.paths.match}`, headers: auth },
    execute: {
      method: "POST",
      path: b.paths.execute,
      url: `${baseUrl}${b.paths.execute}`,
      headers: json,
      body: {
        task: listing.slug,
        input,
        ...(maxCost !== undefined ? { constraints: { max_cost: maxCost } } : {}),
      },
    },
    direct_invoke: {
      method: "POST",
      path: b.paths.directInvoke,
      url: `${baseUrl}${b.paths.directInvoke}`,
      headers: json,
      body: { input, ...(maxCost !== undefined ? { max_cost: maxCost } : {}) },
    },
    input_source: b.exampleInput.placeholder
      ? "placeholders_from_input_schema_types"
      : "declared_in_input_schema",
  };
}

function exampleResponse(b: Basis) {
  const schema = b.facts.listing.output_schema;
  if (!b.outputSchemaDeclared || schema === null) return null;
  const output = exampleFromSchema(schema);
  return {
    http_status: 200,
    body: { success: true, output: output.value },
    output_source: output.placeholder ? "placeholders_from_output_schema_types" : "declared_in_output_schema",
  };
}

function pricing(b: Basis) {
  const { listing } = b.facts;
  return {
    currency: listing.currency,
    ...explained("network", b.requiresPayment ? b.settlementNetwork : null, "free_listing_no_settlement"),
    unit: listing.pricing_model === "per_call" ? "call" : listing.pricing_model,
    model: listing.pricing_model,
    amount_usdc: b.unitPriceUsdc,
    requires_payment: b.requiresPayment,
    // A paid amount is agreed before the call (quote_id or max_cost); free calls need nothing.
    quote_required: b.requiresPayment,
  };
}

function paymentAlternatives(b: Basis) {
  const { listing } = b.facts;
  const alternatives: {
    mode: string;
    endpoint: string;
    currency: string;
    available: boolean;
    note: string;
  }[] = [];
  if (b.requiresPayment) {
    alternatives.push({
      mode: "x402_gateway",
      endpoint: b.paths.x402Invoke,
      currency: "USDC",
      available: b.paidBlocker === null && b.registryVisible,
      note: b.paidBlocker ?? "pay per request with an x402 PAYMENT-SIGNATURE retry; no registration needed",
    });
  }
  if (listing.tumbler_enabled) {
    alternatives.push({
      mode: "tumbler_sandbox",
      endpoint: `/api/tumbler/execute/match?task=${encodeURIComponent(listing.slug)}`,
      currency: "tUSDC",
      available: b.registryVisible,
      note: "simulated units; the seller endpoint still executes, so it is not a no-effects sandbox",
    });
  }
  return alternatives;
}

function verification(b: Basis) {
  const { listing } = b.facts;
  const never = listing.verification_status === null;
  return {
    status: listing.verification_status,
    ...nullReason("status", listing.verification_status, "never_verified"),
    // Verdicts are written only by platform probes (health probes, the verification service).
    ...explained("source", never ? null : "platform_probe", "never_verified"),
    ...explained("last_verified_at", isoOrNull(listing.verified_at), "never_verified"),
  };
}

/** The spec's invocation_contract, schema `<platform>.public-capability-invocation-contract.v1`. */
export function buildInvocationContract(
  b: Basis,
  checks: ReadinessChecks,
  telemetry: Telemetry,
  completeness: Completeness,
) {
  const { listing, platformId } = b.facts;
  const outputReason = "seller_did_not_declare_output_schema";
  return {
    schema: `${platformId}.public-capability-invocation-contract.v1`,
    lifecycle_state: lifecycleState(b),
    listing_id: listing.id,
    input_schema: listing.input_schema,
    input_contract: {
      schema: listing.input_schema,
      schema_status: b.inputSchemaDeclared ? "declared" : "empty",
      validated_by_router: true,
      null_reason: null,
    },
    ...explained("output_schema", listing.output_schema, outputReason),
    output_contract: {
      schema: listing.output_schema,
      ...nullReason("schema", listing.output_schema, outputReason),
      schema_status: b.outputSchemaDeclared ? "declared" : "not_declared",
      validated_by_router: false,
      null_reason: b.outputSchemaDeclared ? null : outputReason,
    },
    example_request: exampleRequest(b),
    ...explained("example_response", exampleResponse(b), "no_output_schema_declared"),
    pricing: pricing(b),
    auth_mode: "bearer",
    auth_scopes_required: [...listing.required_scopes],
    payment_mode: b.paymentMode,
    ...(b.paidBlocker ? { payment_unavailable_reason: b.paidUnavailableReason } : {}),
    payment_alternatives: paymentAlternatives(b),
    retry_policy: {
      safe_to_retry: listing.safe_to_retry,
      provider_safe_to_retry: listing.safe_to_retry,
      idempotency_recommended: true,
      max_attempts: maxAttempts(b),
      guidance: retryGuidance(b),
    },
    idempotency: {
      header: "X-Idempotency-Key",
      body_field: "idempotency_key",
      // Without a key a free call risks no duplicate charge (spec "Limits"); a paid one does.
      required: b.requiresPayment,
      recommended_on: ["PROVIDER_UNAVAILABLE", "TIMEOUT"],
      recommended_key_scope: "buyer_id + listing_id + intended_operation + nonce",
      dedup_scope: "same buyer (agent), operation and payload {task, input, max_cost}",
      key_max_length: 255,
      retention_hours: b.idempotencyRetentionHours,
      replay: "same key and payload returns the original outcome with Idempotent-Replayed: true",
      conflicts: { still_running: "IDEMPOTENCY_KEY_IN_USE", different_payload: "IDEMPOTENCY_KEY_REUSED" },
    },
    operation_safety: {
      provider_safe_to_retry: listing.safe_to_retry,
      risk_flags: [...listing.risk_flags],
      review_required_risk_flags: b.reviewRiskFlags,
      requires_policy_or_human_review: b.reviewRiskFlags.length > 0,
      autonomous_blockers: checks.autonomous,
    },
    failure_modes: FAILURE_MODES,
    fallback_behavior: {
      recommended_entrypoint: b.paths.execute,
      match_endpoint: b.paths.match,
      direct_invoke_endpoint: b.paths.directInvoke,
      status_endpoint: b.paths.status,
      behavior:
        "POST /api/execute may route to another eligible provider for the task on a retryable failure; " +
        "POST /api/invoke/{listing_id} is locked to this listing and never falls back.",
    },
    data_retention: {
      seller_declared_policy: listing.data_retention,
      platform_receipts:
        "invocation records (input, output, attempts) and receipts are kept without expiry; receipts hold " +
        "the response's SHA-256 and size, not its body",
    },
    ...explained("last_verified_at", isoOrNull(listing.verified_at), "never_verified"),
    verification: verification(b),
    telemetry,
    completeness,
  };
}

export type InvocationContract = ReturnType<typeof buildInvocationContract>;
