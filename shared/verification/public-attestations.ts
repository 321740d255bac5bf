import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { type VerifyOutcome, verifyAttestationJws } from "./attestations.js";
import { findAttestation } from "./store/attestations.js";

// The public side of attestations (interface-spec Authentication rule 7: reads and verification are
// public). What is public is only the redacted attestation: the full target stays with the order.

const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);

const jwksUrl = () => `${getConfig().publicBaseUrl}/.well-known/jwks.json`;

/** GET /api/verification/attestations/:id */
export async function readAttestation(id: string, now: Date = new Date()) {
  const row = isUuid(id) ? await findAttestation(db(), id) : undefined;
  if (!row) throw new AppError("NOT_FOUND", "no attestation with this id", { attestation_id: id });
  return {
    attestation_id: row.id,
    kid: row.kid,
    jws: row.jws,
    jwks_url: jwksUrl(),
    expired: row.expires_at.getTime() <= now.getTime(),
    attestation: row.payload,
  };
}

/**
 * POST /api/verification/attestations/verify: {jws}, or {attestation} whose attestation_id names the
 * stored JWS (the attestation given must then be exactly what was signed). Always 200 with the outcome.
 */
export async function verifyAttestation(body: { jws?: string; attestation?: Record<string, unknown> }) {
  let outcome: VerifyOutcome;
  if (body.jws !== undefined) {
    outcome = await verifyAttestationJws(body.jws);
  } else {
    const id = String(body.attestation?.attestation_id ?? "");
    const row = isUuid(id) ? await findAttestation(db(), id) : undefined;
    outcome = row
      ? await verifyAttestationJws(row.jws, body.attestation)
      : {
          valid: false,
          reason: id ? "not_found" : "malformed",
          kid: null,
          verdict: null,
          attestation_id: id || null,
          expires_at: null,
          attestation: null,
        };
  }
  const { attestation: _signed, ...rest } = outcome;
  return { ...rest, jwks_url: jwksUrl() };
}
