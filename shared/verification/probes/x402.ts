import { x402Client, x402HTTPClient } from "@x402/core/client";
import { parsePaymentRequired } from "@x402/core/schemas";
import { getConfig } from "../../config.js";
import { FetchFailure, type SafeFetchResponse, safeFetch } from "../../net/safe-fetch.js";
import type { ProbeCheck } from "../store/orders.js";
import { PROBER_VERSION } from "../terms.js";
import { headerValue, type ProbeResult, type ProbeTarget } from "./types.js";

// The x402 probe (docs/verification.md "Verdicts"): asks for the resource without payment and parses the
// 402 challenge with the official @x402/core client (v2 PAYMENT-REQUIRED header, or a v1 body). It is
// NEVER paid: the client has no payment scheme registered, no signature is ever made and the probe sends
// no payment header. `reachable` when a well-formed challenge parses, `failed` otherwise.

// Only to read challenges: with no scheme registered this client cannot create a payment.
const reader = new x402HTTPClient(new x402Client());

async function ask(url: string, method: "GET" | "POST"): Promise<SafeFetchResponse> {
  const config = getConfig();
  return safeFetch(url, {
    method,
    headers: {
      accept: "application/json",
      "user-agent": PROBER_VERSION,
      ...(method === "POST" ? { "content-type": "application/json" } : {}),
    },
    ...(method === "POST" ? { body: "{}" } : {}),
    timeoutMs: config.verificationProbeTimeoutMs,
    maxBytes: config.verificationProbeMaxBytes,
  });
}

export async function probeX402(target: ProbeTarget): Promise<ProbeResult> {
  const neverPaid: ProbeCheck = {
    name: "never_paid",
    passed: true,
    observation: { payment_header_sent: false, payment_signed: false },
  };
  let response: SafeFetchResponse;
  let method: "GET" | "POST" = "GET";
  try {
    response = await ask(target.url, "GET");
    // A resource served on POST only: ask the same question there (still without payment).
    if (response.status === 405) {
      method = "POST";
      response = await ask(target.url, "POST");
    }
  } catch (error) {
    if (!(error instanceof FetchFailure)) throw error;
    return {
      verdict: "failed",
      checks: [
        { name: "reachable", passed: false, observation: { failure: error.kind, message: error.message } },
        neverPaid,
      ],
    };
  }
  const checks: ProbeCheck[] = [
    {
      name: "reachable",
      passed: true,
      observation: { status: response.status, method, latency_ms: response.latencyMs },
    },
    { name: "status_402", passed: response.status === 402, observation: { status: response.status } },
  ];
  let challenge: ReturnType<typeof reader.getPaymentRequiredResponse> | undefined;
  let problem: string | null = null;
  if (response.status === 402) {
    let body: unknown;
    try {
      body = JSON.parse(response.body.toString("utf8"));
    } catch {
      body = undefined;
    }
    try {
      const decoded = reader.getPaymentRequiredResponse((name) => headerValue(response.headers, name), body);
      const parsed = parsePaymentRequired(decoded);
      if (parsed.success) challenge = decoded;
      else problem = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    } catch (error) {
      problem = (error as Error).message;
    }
  } else {
    problem = "the target did not answer 402 Payment Required";
  }
  const accepts = (challenge?.accepts ?? []) as unknown as Record<string, unknown>[];
  checks.push({
    name: "challenge_parsed",
    passed: challenge !== undefined,
    observation: challenge
      ? {
          x402_version: challenge.x402Version,
          header: headerValue(response.headers, "payment-required") !== null ? "PAYMENT-REQUIRED" : null,
          accepts: accepts.slice(0, 10).map((a) => ({
            scheme: a.scheme,
            network: a.network,
            amount: a.amount ?? a.maxAmountRequired ?? null,
            asset: a.asset,
            pay_to: a.payTo,
          })),
        }
      : { problem },
  });
  checks.push(neverPaid);
  return { verdict: challenge ? "reachable" : "failed", checks };
}
