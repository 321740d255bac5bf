import canonicalize from "canonicalize";
import { CompactSign, compactVerify, decodeProtectedHeader, importJWK, type JWK } from "jose";
import { getConfig } from "../config.js";
import { activeSigningKey, publishedJwks } from "../routing/index.js";
import type { ProbeCheck, Protocol, Verdict } from "./store/orders.js";
import { attestationSchemaName, PROBER_VERSION, type RedactedTarget } from "./terms.js";

// Attestations (docs/verification.md "Attestations"): a compact JWS, protected header {alg: EdDSA, kid,
// typ}, whose payload is the JCS (RFC 8785) bytes of the attestation. The key is the platform's Ed25519
// signing key (shared/routing/request-signing.ts), published with its kid at /.well-known/jwks.json; a
// retired key stays published RETIRED_KEY_PUBLISH_DAYS (7) and ATTESTATION_TTL_SECONDS is at most that,
// so an attestation stays verifiable by anyone until it expires.

export const ATTESTATION_TYP = "agentmarket-attestation+jws";

export interface Attestation {
  schema: string;
  attestation_id: string;
  order_id: string;
  issuer: string;
  target: RedactedTarget;
  protocol: Protocol;
  verdict: Verdict;
  checks: ProbeCheck[];
  prober_version: string;
  observed_at: string;
  expires_at: string;
  paid_order_cannot_change_verdict: true;
}

export type VerifyReason =
  | "malformed"
  | "unsupported_algorithm"
  | "unknown_key"
  | "bad_signature"
  | "tampered"
  | "expired"
  | "not_found";

export interface VerifyOutcome {
  valid: boolean;
  reason: VerifyReason | null;
  kid: string | null;
  verdict: Verdict | null;
  attestation_id: string | null;
  expires_at: string | null;
  attestation: Record<string, unknown> | null;
}

/** The attestation of one probe, before signing. */
export function buildAttestation(input: {
  attestationId: string;
  orderId: string;
  target: RedactedTarget;
  protocol: Protocol;
  verdict: Verdict;
  checks: ProbeCheck[];
  observedAt: Date;
}): Attestation {
  const expires = new Date(input.observedAt.getTime() + getConfig().attestationTtlSeconds * 1000);
  return {
    schema: attestationSchemaName(),
    attestation_id: input.attestationId,
    order_id: input.orderId,
    issuer: getConfig().publicBaseUrl,
    target: input.target,
    protocol: input.protocol,
    verdict: input.verdict,
    checks: input.checks,
    prober_version: PROBER_VERSION,
    observed_at: input.observedAt.toISOString(),
    expires_at: expires.toISOString(),
    paid_order_cannot_change_verdict: true,
  };
}

/** The bytes a signature covers: the JCS form of the attestation. */
export function attestationBytes(attestation: unknown): Uint8Array {
  return new TextEncoder().encode(canonicalize(attestation) as string);
}

/** Signs with the active platform key: the compact JWS and the kid that signed it. */
export async function signAttestation(attestation: Attestation): Promise<{ jws: string; kid: string }> {
  const key = await activeSigningKey();
  const jws = await new CompactSign(attestationBytes(attestation))
    .setProtectedHeader({ alg: "EdDSA", kid: key.kid, typ: ATTESTATION_TYP })
    .sign(key.privateKey);
  return { jws, kid: key.kid };
}

const refused = (reason: VerifyReason, facts: Partial<VerifyOutcome> = {}): VerifyOutcome => ({
  valid: false,
  reason,
  kid: null,
  verdict: null,
  attestation_id: null,
  expires_at: null,
  attestation: null,
  ...facts,
});

/**
 * Verifies a compact JWS as an independent verifier would: EdDSA only, the kid must be in our published
 * JWKS (the same document /.well-known/jwks.json serves), the signature must hold over the payload, the
 * payload must be a JCS-canonical attestation, and it must not have expired. `claimed`, when given, is
 * the attestation a caller holds: it must be exactly what was signed (else `tampered`).
 */
export async function verifyAttestationJws(
  jws: string,
  claimed?: Record<string, unknown>,
  now: Date = new Date(),
): Promise<VerifyOutcome> {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    if (jws.split(".").length !== 3) return refused("malformed");
    header = decodeProtectedHeader(jws);
  } catch {
    return refused("malformed");
  }
  const kid = typeof header.kid === "string" ? header.kid : null;
  if (header.alg !== "EdDSA") return refused("unsupported_algorithm", { kid });
  if (!kid) return refused("unknown_key");
  const jwk = (await publishedJwks()).keys.find((k) => k.kid === kid);
  if (!jwk) return refused("unknown_key", { kid });
  let payloadBytes: Uint8Array;
  try {
    const key = await importJWK(jwk as unknown as JWK, "EdDSA");
    ({ payload: payloadBytes } = await compactVerify(jws, key, { algorithms: ["EdDSA"] }));
  } catch {
    return refused("bad_signature", { kid });
  }
  let attestation: Record<string, unknown>;
  try {
    attestation = JSON.parse(new TextDecoder().decode(payloadBytes));
  } catch {
    return refused("malformed", { kid });
  }
  const signedText = new TextDecoder().decode(payloadBytes);
  if (canonicalize(attestation) !== signedText || attestation.schema !== attestationSchemaName())
    return refused("malformed", { kid });
  const facts = {
    kid,
    verdict: (attestation.verdict as Verdict) ?? null,
    attestation_id: (attestation.attestation_id as string) ?? null,
    expires_at: (attestation.expires_at as string) ?? null,
    attestation,
  };
  if (claimed && canonicalize(claimed) !== signedText) return refused("tampered", facts);
  const expires = Date.parse(String(attestation.expires_at));
  if (!Number.isFinite(expires) || expires <= now.getTime()) return refused("expired", facts);
  return { valid: true, reason: null, ...facts };
}
