import { randomUUID } from "node:crypto";
import canonicalize from "canonicalize";
import { CompactSign, compactVerify, createLocalJWKSet } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { publishedJwks, RETIRED_KEY_PUBLISH_DAYS } from "../../shared/routing/index.js";
import { generateSigningKey } from "../../shared/routing/request-signing.js";
import {
  ATTESTATION_TYP,
  type Attestation,
  attestationBytes,
  buildAttestation,
  signAttestation,
  verifyAttestationJws,
} from "../../shared/verification/attestations.js";
import { redactTarget } from "../../shared/verification/terms.js";
import { useOwnDatabase } from "../helpers/own-database.js";

// Attestations on a database of their own: the rotation case retires the active platform key.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;

beforeAll(async () => {
  ownDb = await useOwnDatabase("attest");
});
afterAll(async () => {
  await closeDb();
  await ownDb?.drop();
});

function attestation(observedAt = new Date()): Attestation {
  return buildAttestation({
    attestationId: randomUUID(),
    orderId: randomUUID(),
    target: redactTarget("https://seller.example/api/run?token=abc"),
    protocol: "http-json",
    verdict: "verified",
    checks: [{ name: "status_2xx", passed: true, observation: { status: 200 } }],
    observedAt,
  });
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

describe("signing", () => {
  it("is a compact JWS, header {alg EdDSA, kid, typ}, over the JCS bytes of the attestation", async () => {
    const a = attestation();
    const { jws, kid } = await signAttestation(a);
    const [header, payload] = jws.split(".");
    expect(JSON.parse(Buffer.from(header!, "base64url").toString())).toEqual({
      alg: "EdDSA",
      kid,
      typ: ATTESTATION_TYP,
    });
    expect(Buffer.from(payload!, "base64url").toString()).toBe(canonicalize(a));
    // An independent check with plain jose against the JWKS we publish.
    const jwks = createLocalJWKSet((await publishedJwks()) as never);
    const verified = await compactVerify(jws, jwks, { algorithms: ["EdDSA"] });
    expect(new TextDecoder().decode(verified.payload)).toBe(canonicalize(a));
  });

  it("keeps the ttl inside the window a retired key stays published", async () => {
    const a = attestation();
    const ttlMs = Date.parse(a.expires_at) - Date.parse(a.observed_at);
    expect(ttlMs).toBe(getConfig().attestationTtlSeconds * 1000);
    expect(ttlMs).toBeLessThanOrEqual(RETIRED_KEY_PUBLISH_DAYS * 24 * 3600 * 1000);
  });
});

describe("verification refuses, each with its reason", () => {
  it("accepts an untouched attestation", async () => {
    const a = attestation();
    const { jws, kid } = await signAttestation(a);
    expect(await verifyAttestationJws(jws)).toMatchObject({
      valid: true,
      reason: null,
      kid,
      verdict: "verified",
      attestation_id: a.attestation_id,
    });
  });

  it("bad_signature: a payload changed after signing", async () => {
    const a = attestation();
    const { jws } = await signAttestation(a);
    const [h, , s] = jws.split(".");
    const forged = `${h}.${Buffer.from(canonicalize({ ...a, verdict: "verified", checks: [] })!).toString("base64url")}.${s}`;
    expect(await verifyAttestationJws(forged)).toMatchObject({ valid: false, reason: "bad_signature" });
  });

  it("tampered: an attestation object that is not exactly what was signed", async () => {
    const a = attestation();
    const { jws } = await signAttestation(a);
    const changed = { ...a, verdict: "failed" } as Record<string, unknown>;
    expect(await verifyAttestationJws(jws, changed)).toMatchObject({ valid: false, reason: "tampered" });
    expect(await verifyAttestationJws(jws, a as never)).toMatchObject({ valid: true });
  });

  it("expired: past its expires_at, even with a good signature", async () => {
    const old = attestation(new Date(Date.now() - (getConfig().attestationTtlSeconds + 60) * 1000));
    const { jws } = await signAttestation(old);
    expect(await verifyAttestationJws(jws)).toMatchObject({
      valid: false,
      reason: "expired",
      verdict: "verified",
    });
  });

  it("unknown_key: signed by a key that is not in our JWKS", async () => {
    const stranger = generateSigningKey().key;
    const a = attestation();
    const jws = await new CompactSign(attestationBytes(a))
      .setProtectedHeader({ alg: "EdDSA", kid: stranger.kid, typ: ATTESTATION_TYP })
      .sign(stranger.privateKey);
    expect(await verifyAttestationJws(jws)).toMatchObject({
      valid: false,
      reason: "unknown_key",
      kid: stranger.kid,
    });
  });

  it("unsupported_algorithm: anything but EdDSA, even naming our kid", async () => {
    const a = attestation();
    const { kid } = await signAttestation(a);
    const hs = await new CompactSign(attestationBytes(a))
      .setProtectedHeader({ alg: "HS256", kid })
      .sign(new TextEncoder().encode("a shared secret anyone could have"));
    expect(await verifyAttestationJws(hs)).toMatchObject({ valid: false, reason: "unsupported_algorithm" });
    const none = `${b64({ alg: "none", kid })}.${Buffer.from(attestationBytes(a)).toString("base64url")}.`;
    expect(await verifyAttestationJws(none)).toMatchObject({ valid: false, reason: "unsupported_algorithm" });
  });

  it("malformed: not a compact JWS", async () => {
    for (const junk of ["", "abc", "a.b", "!!.??.##", `${b64("x")}.e30.`])
      expect((await verifyAttestationJws(junk)).reason, junk).toBe("malformed");
  });
});

describe("key rotation", () => {
  it("an attestation signed before a rotation still verifies with the retired key", async () => {
    const a = attestation();
    const { jws, kid } = await signAttestation(a);
    // Rotate: retire the active key and make a new one active, as an operator would.
    await db()("platform_signing_keys").whereNull("retired_at").update({ retired_at: db().fn.now() });
    const next = generateSigningKey();
    await db()("platform_signing_keys").insert({
      kid: next.key.kid,
      public_jwk: JSON.stringify(next.key.publicJwk),
      private_pkcs8: next.pkcs8,
    });
    const kids = (await publishedJwks()).keys.map((k) => k.kid);
    expect(kids).toEqual(expect.arrayContaining([kid, next.key.kid]));
    expect(await verifyAttestationJws(jws)).toMatchObject({ valid: true, kid });
  });

  it("a key retired longer ago than the window is gone, and so are its attestations", async () => {
    const old = generateSigningKey();
    await db()("platform_signing_keys").insert({
      kid: old.key.kid,
      public_jwk: JSON.stringify(old.key.publicJwk),
      private_pkcs8: old.pkcs8,
      retired_at: db().raw("now() - make_interval(days => ?)", [RETIRED_KEY_PUBLISH_DAYS + 1]),
    });
    const jws = await new CompactSign(attestationBytes(attestation()))
      .setProtectedHeader({ alg: "EdDSA", kid: old.key.kid, typ: ATTESTATION_TYP })
      .sign(old.key.privateKey);
    expect(await verifyAttestationJws(jws)).toMatchObject({ valid: false, reason: "unknown_key" });
  });
});

describe("redaction", () => {
  it("keeps scheme and host, hashes the path, drops userinfo, query and fragment", () => {
    const r = redactTarget("https://user:pw@api.seller.example:8443/v1/secret-path?key=SECRET#frag");
    expect(r.scheme).toBe("https");
    expect(r.host).toBe("api.seller.example:8443");
    expect(r.path_sha256).toMatch(/^[0-9a-f]{64}$/);
    const text = JSON.stringify(r);
    for (const secret of ["user", "pw", "secret-path", "SECRET", "frag", "key="])
      expect(text).not.toContain(secret);
    expect(redactTarget("https://api.seller.example:8443/v1/secret-path").path_sha256).toBe(r.path_sha256);
    expect(redactTarget("https://api.seller.example:8443/v1/other").path_sha256).not.toBe(r.path_sha256);
  });
});
