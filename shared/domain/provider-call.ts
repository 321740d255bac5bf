import { createHash } from "node:crypto";
import { getConfig } from "../config.js";
import type { CallTarget, InvocationRow } from "../db/invocations.js";
import type { ErrorCode } from "../errors.js";
import { FetchFailure, safeFetch } from "../net/safe-fetch.js";

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

/**
 * The invocation protocol (README "Calling a seller"): POST JSON {invocation_id, listing_id, attempt,
 * input} with Idempotency-Key = invocation id. A 2xx JSON answer of {success: true, output} yields
 * output; any other JSON value is the output itself; success:false, non-JSON, 429/503 and other
 * statuses are failures classified for retry and fallback.
 */
export async function callProvider(
  listing: CallTarget,
  invocation: InvocationRow,
  attemptNo: number,
): Promise<ProviderResult> {
  const config = getConfig();
  const url = resolveEndpoint(listing.endpoint_url);
  let response: Awaited<ReturnType<typeof safeFetch>>;
  try {
    response = await safeFetch(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        "user-agent": `${config.platformId}-router/1`,
        "idempotency-key": invocation.id,
        "x-invocation-id": invocation.id,
        "x-listing-id": listing.id,
      },
      body: JSON.stringify({
        invocation_id: invocation.id,
        listing_id: listing.id,
        attempt: attemptNo,
        input: invocation.input,
      }),
      timeoutMs: Math.min(listing.max_latency_ms, MAX_PROVIDER_LATENCY_MS),
      maxBytes: config.providerResponseMaxBytes,
    });
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    if (error.kind === "timeout") return failure("TIMEOUT", error.message);
    if (error.kind === "connect") return failure("PROVIDER_UNAVAILABLE", error.message);
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
