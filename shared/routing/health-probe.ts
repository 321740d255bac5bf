import { getConfig } from "../config.js";
import { FetchFailure, safeFetch } from "../net/safe-fetch.js";
import { resolveEndpoint } from "./provider-call.js";

/** What a probe found: `ok` when the endpoint answered with a status below 500 in time. */
export interface ProbeResult {
  ok: boolean;
  httpStatus: number | null;
  latencyMs: number | null;
  error: string | null;
}

/** The probe body: no invocation_id and no input, so no invocation-protocol handler can mistake it. */
export const PROBE_BODY = JSON.stringify({ probe: true });

/** `x-agentmarket-probe` with the default PLATFORM_ID; a seller may answer it at once. */
export function probeHeaderName(): string {
  return `x-${getConfig().platformId}-probe`;
}

/**
 * Probes one listing endpoint (docs/routing.md "Health probes and the circuit breaker"): a POST of
 * {"probe": true} with the probe header, the same method, path and content type a real call uses, but
 * no invocation, no Idempotency-Key and nothing metered or charged. Any answer below 500 within
 * HEALTH_PROBE_TIMEOUT_MS is a success: an endpoint that rejects the probe (400, 401, 405, 429) is
 * still reachable. 5xx, timeouts, refused connections, refused addresses and redirects (never followed,
 * as for real calls) are failures.
 */
export async function probeEndpoint(endpointUrl: string): Promise<ProbeResult> {
  const config = getConfig();
  try {
    const response = await safeFetch(resolveEndpoint(endpointUrl), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        "user-agent": `${config.platformId}-health/1`,
        [probeHeaderName()]: "1",
      },
      body: PROBE_BODY,
      timeoutMs: config.healthProbeTimeoutMs,
      maxBytes: config.providerResponseMaxBytes,
      maxRedirects: 0,
      // Only a stored first-party path (resolved against FIRST_PARTY_BASE_URL) may reach our own origin.
      trusted: endpointUrl.startsWith("/"),
    });
    const ok = response.status < 500;
    return {
      ok,
      httpStatus: response.status,
      latencyMs: response.latencyMs,
      error: ok ? null : `the endpoint answered HTTP ${response.status}`,
    };
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    return { ok: false, httpStatus: null, latencyMs: null, error: `${error.kind}: ${error.message}` };
  }
}
