import { getConfig } from "../../config.js";
import { outputSchemaViolations } from "../../kernel/json-schema.js";
import { FetchFailure, safeFetch } from "../../net/safe-fetch.js";
import { activeSigningKey, signMessage } from "../../routing/index.js";
import type { ProbeCheck } from "../store/orders.js";
import { PROBER_VERSION } from "../terms.js";
import { headerValue, type ProbeResult, type ProbeTarget } from "./types.js";

// The http-json probe (docs/verification.md "Verdicts"): one signed POST through the safe-fetch boundary.
// `verified` when it answers 2xx JSON that matches the listing's output_schema (when one is declared),
// `reachable` when it answers but not fully, `failed` when it cannot be reached. No credentials, no
// payment, no redirects followed.

/** Failures where the endpoint did answer (a redirect, an oversized body): reachable, not verified. */
const ANSWERED = new Set(["redirect", "too_large"]);

export async function probeHttpJson(target: ProbeTarget): Promise<ProbeResult> {
  const config = getConfig();
  const body = JSON.stringify({ verification_order_id: target.orderId, probe: PROBER_VERSION, input: {} });
  const key = await activeSigningKey();
  const https = new URL(target.url).protocol === "https:";
  const tls: ProbeCheck = {
    name: "tls",
    passed: https,
    observation: https
      ? { scheme: "https", certificate_verified_by: "node_default_ca_store" }
      : { scheme: "http", note: "no TLS: the target is plain HTTP" },
  };
  let response: Awaited<ReturnType<typeof safeFetch>>;
  try {
    response = await safeFetch(target.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        "user-agent": PROBER_VERSION,
        "x-verification-order-id": target.orderId,
        ...signMessage(key, `verification.${target.orderId}`, body),
      },
      body,
      timeoutMs: config.verificationProbeTimeoutMs,
      maxBytes: config.verificationProbeMaxBytes,
    });
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    const answered = ANSWERED.has(error.kind);
    return {
      verdict: answered ? "reachable" : "failed",
      checks: [
        { name: "reachable", passed: answered, observation: { failure: error.kind, message: error.message } },
        tls,
      ],
    };
  }
  const checks: ProbeCheck[] = [
    {
      name: "reachable",
      passed: true,
      observation: { status: response.status, latency_ms: response.latencyMs },
    },
  ];
  const ok = response.status >= 200 && response.status < 300;
  checks.push({ name: "status_2xx", passed: ok, observation: { status: response.status } });
  const contentType = headerValue(response.headers, "content-type");
  let parsed: unknown;
  let isJson = false;
  try {
    parsed = JSON.parse(response.body.toString("utf8"));
    isJson = true;
  } catch {
    isJson = false;
  }
  checks.push({
    name: "json_body",
    passed: isJson,
    observation: { content_type: contentType, bytes: response.body.length },
  });
  let schemaOk = true;
  if (target.outputSchema) {
    // A {success, output} envelope is unwrapped as the router does (shared/routing/provider-call.ts).
    const output =
      parsed !== null && typeof parsed === "object" && "success" in parsed && "output" in parsed
        ? (parsed as { output: unknown }).output
        : parsed;
    const violations = isJson
      ? outputSchemaViolations(target.outputSchema.schema, output)
      : ["the body is not JSON"];
    schemaOk = violations === null;
    checks.push({
      name: "output_schema",
      passed: schemaOk,
      observation: { listing_id: target.outputSchema.listingId, violations: violations ?? [] },
    });
  }
  checks.push({ name: "latency", passed: true, observation: { latency_ms: response.latencyMs } });
  checks.push(tls);
  return { verdict: ok && isJson && schemaOk ? "verified" : "reachable", checks };
}
