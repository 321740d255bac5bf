import { createPublicKey, verify } from "node:crypto";

// A seller's side of request signing, written as docs/routing.md tells sellers to write it (node:crypto
// only, nothing from the platform's code), so tests check the protocol rather than our own verifier.

export interface Jwks {
  keys: { kid: string; kty: string; crv: string; x: string }[];
}

type Headers = Record<string, string | string[] | undefined>;

const TOLERANCE_SECONDS = 5 * 60;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Checks a call the way the snippet in docs/routing.md does: a v1a signature over
 * `${webhook-id}.${webhook-timestamp}.${rawBody}` by a JWKS key (the one named by webhook-key-id, or
 * any), with the timestamp within 5 minutes. Null when it verifies, else why not.
 */
export function checkPlatformSignature(
  headers: Headers,
  rawBody: Buffer,
  jwks: Jwks,
  nowSeconds = Date.now() / 1000,
): string | null {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp") ?? "";
  const signatures = (header(headers, "webhook-signature") ?? "").split(" ");
  if (!id || !/^\d+$/.test(timestamp)) return "unsigned request";
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) return "stale timestamp";
  const kid = header(headers, "webhook-key-id");
  const keys = jwks.keys
    .filter((jwk) => !kid || jwk.kid === kid)
    .map((jwk) => createPublicKey({ key: jwk, format: "jwk" }));
  const content = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), rawBody]);
  const ok = signatures.some(
    (s) =>
      s.startsWith("v1a,") &&
      keys.some((key) => verify(null, content, key, Buffer.from(s.slice(4), "base64"))),
  );
  return ok ? null : "bad signature";
}
