import { createHash } from "node:crypto";
import { getConfig } from "../config.js";
import type { Protocol, Verdict } from "./store/orders.js";

// The fixed terms of the verification service (interface-spec "Verification records", "Limits").

/** 5 USDC per order and per monitoring run (the spec's price; not configurable). */
export const VERIFICATION_PRICE_MICROS = 5_000_000n;

/** The prober's name and version, written into every attestation. */
export const PROBER_VERSION = "agentmarket-prober/1.0.0";

export const PROTOCOLS: readonly Protocol[] = ["http-json", "x402", "mcp"];

export const VERDICTS: readonly Verdict[] = ["verified", "reachable", "failed"];

/** The best verdict each protocol's probe can give: only http-json checks a real answer. */
export const MAX_ACHIEVABLE_VERDICT: Record<Protocol, Verdict> = {
  "http-json": "verified",
  x402: "reachable",
  mcp: "reachable",
};

export const surfaceSchemaName = () => `${getConfig().platformId}.verification-service.surface.v1`;
export const attestationSchemaName = () => `${getConfig().platformId}.verification-attestation.v1`;
export const connectorSchemaName = () => `${getConfig().platformId}.agent-connector.v1`;

/** What a public attestation says about the target: scheme, host (with port) and a hash of the path. */
export interface RedactedTarget {
  scheme: string;
  host: string;
  path_sha256: string;
  display: string;
}

/**
 * The public form of a target URL: no userinfo, no query string, no fragment, and the path only as its
 * SHA-256 (a buyer who knows the URL can check it; nobody else learns a secret path or token from it).
 */
export function redactTarget(url: string): RedactedTarget {
  const parsed = new URL(url);
  const scheme = parsed.protocol.replace(/:$/, "");
  const pathSha256 = createHash("sha256").update(parsed.pathname).digest("hex");
  return {
    scheme,
    host: parsed.host,
    path_sha256: pathSha256,
    display: `${scheme}://${parsed.host}/…#sha256:${pathSha256.slice(0, 12)}`,
  };
}
