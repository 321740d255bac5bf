import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../shared/config.js";
import {
  generateSigningKey,
  jwkThumbprint,
  type SigningKey,
  signingKeyFromPkcs8,
  signMessage,
} from "../../shared/routing/request-signing.js";
import { checkPlatformSignature, type Jwks } from "../helpers/seller-verify.js";

// RFC 8037 appendix A.1–A.3: an Ed25519 key and its RFC 7638 thumbprint.
const RFC_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
const RFC_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
const RFC_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k";

function jwksOf(...keys: SigningKey[]): Jwks {
  return { keys: keys.map((k) => ({ ...k.publicJwk, kid: k.kid, use: "sig", alg: "EdDSA" })) };
}

const BODY = JSON.stringify({ invocation_id: "inv", attempt: 1, input: { text: "héllo ✓" } });
const now = Math.floor(Date.now() / 1000);

describe("key identity", () => {
  it("kid is the RFC 7638 thumbprint (RFC 8037 test vector)", () => {
    expect(jwkThumbprint({ kty: "OKP", crv: "Ed25519", x: RFC_X })).toBe(RFC_THUMBPRINT);
    const pkcs8 = createPrivateKey({ key: { kty: "OKP", crv: "Ed25519", d: RFC_D, x: RFC_X }, format: "jwk" })
      .export({ format: "der", type: "pkcs8" })
      .toString("base64url");
    const key = signingKeyFromPkcs8(pkcs8);
    expect(key.kid).toBe(RFC_THUMBPRINT);
    expect(key.publicJwk).toEqual({ kty: "OKP", crv: "Ed25519", x: RFC_X });
  });

  it("a generated key survives its PKCS#8 round trip with the same kid", () => {
    const { key, pkcs8 } = generateSigningKey();
    expect(signingKeyFromPkcs8(pkcs8).kid).toBe(key.kid);
    expect(key.kid).toBe(jwkThumbprint(key.publicJwk));
  });

  it("refuses a key that is not Ed25519", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 })
      .privateKey.export({ format: "der", type: "pkcs8" })
      .toString("base64url");
    expect(() => signingKeyFromPkcs8(rsa)).toThrow(/Ed25519/);
  });
});

describe("signMessage", () => {
  const { key } = generateSigningKey();
  const headers = signMessage(key, "inv.1", BODY, now);

  it("writes Standard Webhooks headers: id, unix-seconds timestamp, v1a signature, and the kid", () => {
    expect(headers["webhook-id"]).toBe("inv.1");
    expect(headers["webhook-timestamp"]).toBe(String(now));
    expect(headers["webhook-signature"]).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    expect(headers["webhook-key-id"]).toBe(key.kid);
  });

  it("verifies over id.timestamp.raw body with the public key taken from a JWKS", () => {
    expect(checkPlatformSignature(headers, Buffer.from(BODY), jwksOf(key))).toBeNull();
  });

  it("verifies without webhook-key-id by trying every published key", () => {
    const { "webhook-key-id": _kid, ...rest } = headers;
    const other = generateSigningKey().key;
    expect(checkPlatformSignature(rest, Buffer.from(BODY), jwksOf(other, key))).toBeNull();
  });

  it("fails when the body, timestamp or id was changed", () => {
    const jwks = jwksOf(key);
    const tamperedBody = Buffer.from(BODY.replace("héllo", "hello"));
    expect(checkPlatformSignature(headers, tamperedBody, jwks)).toBe("bad signature");
    const laterTimestamp = { ...headers, "webhook-timestamp": String(now + 1) };
    expect(checkPlatformSignature(laterTimestamp, Buffer.from(BODY), jwks)).toBe("bad signature");
    const otherId = { ...headers, "webhook-id": "inv.2" };
    expect(checkPlatformSignature(otherId, Buffer.from(BODY), jwks)).toBe("bad signature");
  });

  it("fails against a JWKS that does not hold the signing key", () => {
    const other = generateSigningKey().key;
    const { "webhook-key-id": _kid, ...rest } = headers;
    expect(checkPlatformSignature(rest, Buffer.from(BODY), jwksOf(other))).toBe("bad signature");
  });

  it("is rejected as stale more than 5 minutes after it was signed", () => {
    const old = signMessage(key, "inv.1", BODY, now - 301);
    expect(checkPlatformSignature(old, Buffer.from(BODY), jwksOf(key))).toBe("stale timestamp");
  });
});

describe("PLATFORM_SIGNING_KEY", () => {
  it("accepts an Ed25519 PKCS#8 key in base64url and is unset by default", () => {
    const { pkcs8 } = generateSigningKey();
    expect(parseConfig({ PLATFORM_SIGNING_KEY: pkcs8 }).platformSigningKey).toBe(pkcs8);
    expect(parseConfig({}).platformSigningKey).toBeUndefined();
  });

  it("rejects other keys and garbage without echoing the value", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 })
      .privateKey.export({ format: "der", type: "pkcs8" })
      .toString("base64url");
    for (const value of [rsa, "not-a-key", `${generateSigningKey().pkcs8}+/=`]) {
      try {
        parseConfig({ PLATFORM_SIGNING_KEY: value });
        expect.unreachable(`accepted ${value.slice(0, 10)}…`);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).problems).toEqual([expect.stringContaining("PLATFORM_SIGNING_KEY")]);
        expect((error as Error).message).not.toContain(value);
      }
    }
  });
});
