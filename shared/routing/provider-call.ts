import { createHash } from "node:crypto";
import { SpanKind } from "@opentelemetry/api";
import { getConfig } from "../config.js";
import type { ErrorCode } from "../errors.js";
import { outputSchemaViolations } from "../kernel/json-schema.js";
import { FetchFailure, safeFetch } from "../net/safe-fetch.js";
import { inSpan, traceHeaders } from "../observability/tracing.js";
import { activeSigningKey, type SignatureHeaders, signMessageOffThread } from "./request-signing.js";
import type { CallTarget, InvocationRow } from "./store/invocations.js";

/** The longest any provider call may take, whatever a listing declares (spec: max_latency_ms 30000). */
export const MAX_PROVIDER_LATENCY_MS = 30_000;

export type ProviderFailureCode = Extract<ErrorCode, "PROVIDER_FAILED" | "PROVIDER_UNAVAILABLE" | "TIMEOUT">;

export interface ProviderEvidence {
  attempt_no: number;
  http_status: number;
  latency_ms: number;
  response_sha256: string;
  response_bytes: number;
  endpoint_origin: string;
}

export type ProviderResult =
  | { ok: true; output: unknown; evidence: ProviderEvidence }
  | {
      ok: false;
      code: ProviderFailureCode;
      message: string;
      httpStatus: number | null;
      latencyMs: number | null;
    };

/** First-party listings store a path; it resolves against FIRST_PARTY_BASE_URL. */
export function resolveEndpoint(endpointUrl: string): string {
  return endpointUrl.startsWith("/") ? `${getConfig().firstPartyBaseUrl}${endpointUrl}` : endpointUrl;
}

function failure(
  code: ProviderFailureCode,
  message: string,
  httpStatus: number | null = null,
  latencyMs: number | null = null,
): ProviderResult {
  return { ok: false, code, message, httpStatus, latencyMs };
}

/** webhook-id of one attempt: stable for that attempt, distinct across attempts (their bodies differ). */
export function messageId(invocationId: string, attemptNo: number): string {
  return `${invocationId}.${attemptNo}`;
}

/** One attempt's request body and its signature headers, for the call they were made for. */
export interface SignedRequest {
  invocationId: string;
  listingId: string;
  attemptNo: number;
  body: string;
  signature: SignatureHeaders;
}

/** Builds and signs an attempt's request (the invocation protocol's body, below). */
export async function signRequest(
  invocationId: string,
  listingId: string,
  attemptNo: number,
  input: unknown,
): Promise<SignedRequest> {
  const body = JSON.stringify({
    invocation_id: invocationId,
    listing_id: listingId,
    attempt: attemptNo,
    input,
  });
  const signature = await signMessageOffThread(
    await activeSigningKey(),
    messageId(invocationId, attemptNo),
    body,
  );
  return { invocationId, listingId, attemptNo, body, signature };
}

/**
 * The invocation protocol (docs/routing.md "Calling a provider"): POST JSON {invocation_id, listing_id, attempt,
 * input} with Idempotency-Key = invocation id, signed Standard Webhooks style with the platform key.
 * A 2xx JSON answer of {success: true, output} yields output; any other JSON value is the output
 * itself; output that breaks the listing's output_schema, success:false, non-JSON, 429/503 and other
 * statuses are failures classified for retry and fallback. `signed` is the request signed in advance
 * (attempt 1 of a run claimed by its submitting request, signed while the claim was written); it is
 * used only if it was made for this very call, else the request is signed now.
 */
export async function callProvider(
  listing: CallTarget,
  invocation: InvocationRow,
  attemptNo: number,
  signed?: Promise<SignedRequest>,
): Promise<ProviderResult> {
  const config = getConfig();
  const url = resolveEndpoint(listing.endpoint_url);
  const early = signed && (await signed.catch(() => undefined));
  const { body, signature } =
    early?.invocationId === invocation.id && early.listingId === listing.id && early.attemptNo === attemptNo
      ? early
      : await signRequest(invocation.id, listing.id, attemptNo, invocation.input);
  let response: Awaited<ReturnType<typeof safeFetch>>;
  try {
    // A CLIENT span per seller call; the seller receives its trace context (traceparent) when tracing is on.
    response = await inSpan(
      "provider call",
      { kind: SpanKind.CLIENT, attributes: { "agentmarket.attempt": attemptNo } },
      () =>
        safeFetch(url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            accept: "application/json",
            "user-agent": `${config.platformId}-router/1`,
            "idempotency-key": invocation.id,
            "x-invocation-id": invocation.id,
            "x-listing-id": listing.id,
            ...signature,
            ...traceHeaders(),
          },
          body,
          timeoutMs: Math.min(listing.max_latency_ms, MAX_PROVIDER_LATENCY_MS),
          maxBytes: config.providerResponseMaxBytes,
          // First-party listings store a path on the platform's own origin: that call is exempt from the
          // public-address rule (and only that origin; safe-fetch checks it).
          trusted: listing.endpoint_url.startsWith("/"),
        }),
    );
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    if (error.kind === "timeout") return failure("TIMEOUT", error.message);
    if (error.kind === "connect") return failure("PROVIDER_UNAVAILABLE", error.message);
    if (error.kind === "blocked")
      return failure("PROVIDER_FAILED", `the endpoint is not callable: ${error.message}`);
    return failure("PROVIDER_FAILED", error.message);
  }

  const { status, latencyMs } = response;
  if (status === 429 || status === 503)
    return failure("PROVIDER_UNAVAILABLE", `provider answered HTTP ${status}`, status, latencyMs);
  if (status < 200 || status >= 300)
    return failure("PROVIDER_FAILED", `provider answered HTTP ${status}`, status, latencyMs);
  let parsed: unknown;
  try {
    parsed = JSON.parse(response.body.toString("utf8"));
  } catch {
    return failure("PROVIDER_FAILED", "provider answered with a body that is not JSON", status, latencyMs);
  }
  let output = parsed;
  if (parsed !== null && typeof parsed === "object" && "success" in parsed && "output" in parsed) {
    if ((parsed as { success: unknown }).success !== true) {
      return failure("PROVIDER_FAILED", "provider reported success: false", status, latencyMs);
    }
    output = (parsed as { output: unknown }).output;
  }
  if (listing.output_schema) {
    const violations = outputSchemaViolations(listing.output_schema, output);
    if (violations) {
      const message = `provider output does not match the listing's output_schema: ${violations.join("; ")}`;
      return failure("PROVIDER_FAILED", message, status, latencyMs);
    }
  }
  return {
    ok: true,
    output,
    evidence: {
      attempt_no: attemptNo,
      http_status: status,
      latency_ms: latencyMs,
      response_sha256: createHash("sha256").update(response.body).digest("hex"),
      response_bytes: response.body.length,
      endpoint_origin: new URL(url).origin,
    },
  };
}
