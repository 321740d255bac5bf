import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import {
  type Ed25519Jwk,
  findActiveSigningKey,
  insertSigningKeyIfNone,
  listPublishableKeys,
} from "./store/signing-keys.js";

/** Days a retired key stays in the JWKS, so messages signed just before a rotation still verify. */
export const RETIRED_KEY_PUBLISH_DAYS = 7;

/** How often a process re-reads the database's active key, so a rotation reaches every process. */
const KEY_RELOAD_MS = 5 * 60_000;

export interface SigningKey {
  kid: string;
  publicJwk: Ed25519Jwk;
  privateKey: KeyObject;
}

export interface PublishedJwk extends Ed25519Jwk {
  kid: string;
  use: "sig";
  alg: "EdDSA";
}

/** Standard Webhooks headers, plus webhook-key-id (ours) naming the JWKS key that signed. */
export type SignatureHeaders = {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
  "webhook-key-id": string;
};

/** RFC 7638 thumbprint: SHA-256 over the required members in lexicographic order, base64url. */
export function jwkThumbprint(jwk: Ed25519Jwk): string {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x });
  return createHash("sha256").update(canonical).digest("base64url");
}

/** A signing key from its stored form (PKCS#8 DER, base64url); refuses anything but Ed25519. */
export function signingKeyFromPkcs8(pkcs8: string): SigningKey {
  const privateKey = createPrivateKey({ key: Buffer.from(pkcs8, "base64url"), format: "der", type: "pkcs8" });
  if (privateKey.asymmetricKeyType !== "ed25519") throw new Error("the platform signing key must be Ed25519");
  const { x } = createPublicKey(privateKey).export({ format: "jwk" });
  const publicJwk: Ed25519Jwk = { kty: "OKP", crv: "Ed25519", x: x as string };
  return { kid: jwkThumbprint(publicJwk), publicJwk, privateKey };
}

/** A fresh Ed25519 key with its PKCS#8 DER (base64url) form, the format PLATFORM_SIGNING_KEY takes. */
export function generateSigningKey(): { key: SigningKey; pkcs8: string } {
  const { privateKey } = generateKeyPairSync("ed25519");
  const pkcs8 = privateKey.export({ format: "der", type: "pkcs8" }).toString("base64url");
  return { key: signingKeyFromPkcs8(pkcs8), pkcs8 };
}

/** The database's active key, created first if there is none (concurrent creators agree on one). */
async function loadStoredKey(): Promise<SigningKey> {
  const existing = await findActiveSigningKey(db());
  if (existing) return signingKeyFromPkcs8(existing.private_pkcs8);
  const fresh = generateSigningKey();
  await insertSigningKeyIfNone(db(), {
    kid: fresh.key.kid,
    public_jwk: fresh.key.publicJwk,
    private_pkcs8: fresh.pkcs8,
  });
  // Read back rather than use `fresh`: another process may have won the insert.
  const winner = await findActiveSigningKey(db());
  if (!winner) throw new Error("no active platform signing key (retired while being created?)");
  return signingKeyFromPkcs8(winner.private_pkcs8);
}

let cache: { key: Promise<SigningKey>; loadedAt: number } | undefined;
let lastGood: SigningKey | undefined;

/**
 * The key this process signs with: PLATFORM_SIGNING_KEY when set, else the database's active key,
 * loaded on first use and re-read every few minutes. A failed re-read keeps the last good key.
 */
export function activeSigningKey(): Promise<SigningKey> {
  const configured = getConfig().platformSigningKey;
  if (cache && (configured || Date.now() - cache.loadedAt < KEY_RELOAD_MS)) return cache.key;
  const entry = {
    loadedAt: Date.now(),
    key: (configured ? Promise.resolve().then(() => signingKeyFromPkcs8(configured)) : loadStoredKey()).then(
      (key) => {
        lastGood = key;
        return key;
      },
      (error: unknown) => {
        if (cache === entry) cache = undefined;
        if (lastGood) return lastGood;
        throw error;
      },
    ),
  };
  cache = entry;
  return entry.key;
}

/** Signs one message, Standard Webhooks style: `v1a,` + base64 Ed25519 over `${id}.${timestamp}.${body}`. */
export function signMessage(
  key: SigningKey,
  id: string,
  body: string,
  timestampSeconds = Math.floor(Date.now() / 1000),
): SignatureHeaders {
  const signature = sign(null, signedContent(id, timestampSeconds, body), key.privateKey);
  return signatureHeaders(key, id, timestampSeconds, signature);
}

/**
 * signMessage on libuv's thread pool: the Ed25519 signature of every provider call was ~4 % of the
 * service's one thread under load (docs/benchmarks.md "The seventh round").
 */
export function signMessageOffThread(key: SigningKey, id: string, body: string): Promise<SignatureHeaders> {
  const timestampSeconds = Math.floor(Date.now() / 1000);
  return new Promise((resolve, reject) =>
    sign(null, signedContent(id, timestampSeconds, body), key.privateKey, (error, signature) =>
      error ? reject(error) : resolve(signatureHeaders(key, id, timestampSeconds, signature)),
    ),
  );
}

function signedContent(id: string, timestampSeconds: number, body: string): Buffer {
  return Buffer.from(`${id}.${timestampSeconds}.${body}`, "utf8");
}

function signatureHeaders(
  key: SigningKey,
  id: string,
  timestampSeconds: number,
  signature: Buffer,
): SignatureHeaders {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": `v1a,${signature.toString("base64")}`,
    "webhook-key-id": key.kid,
  };
}

function published(kid: string, jwk: Ed25519Jwk): PublishedJwk {
  return { kty: "OKP", crv: "Ed25519", x: jwk.x, kid, use: "sig", alg: "EdDSA" };
}

/**
 * The JWKS document: the key this process signs with, the database's active key (unless
 * PLATFORM_SIGNING_KEY replaces it), and keys retired within RETIRED_KEY_PUBLISH_DAYS.
 */
export async function publishedJwks(): Promise<{ keys: PublishedJwk[] }> {
  const own = await activeSigningKey();
  const stored = await listPublishableKeys(db(), {
    includeActive: !getConfig().platformSigningKey,
    retiredWithinDays: RETIRED_KEY_PUBLISH_DAYS,
  });
  const keys = new Map([[own.kid, published(own.kid, own.publicJwk)]]);
  for (const row of stored) if (!keys.has(row.kid)) keys.set(row.kid, published(row.kid, row.public_jwk));
  return { keys: [...keys.values()] };
}

/** How far a signed platform call's webhook-timestamp may be from now (Standard Webhooks' 5 minutes). */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

function refuseUnsigned(why: string): AppError {
  return new AppError("UNAUTHORIZED", `this endpoint serves only the platform's own signed calls: ${why}`, {
    reason: "platform_signature_required",
    detail: why,
    hint: "call the tool through POST /api/execute, POST /api/invoke/{listing_id}, the x402 edge, the sandbox or MCP",
  });
}

/**
 * Accepts a request only when it carries the platform's own Standard Webhooks signature (the executions
 * worker's call, docs/tools.md "Signed calls only"): webhook-id, webhook-timestamp within
 * SIGNATURE_TOLERANCE_SECONDS, and a v1a Ed25519 signature over `${id}.${timestamp}.${rawBody}` by a key of
 * our JWKS (the active key, or one retired within RETIRED_KEY_PUBLISH_DAYS). Anything else → 401.
 */
export async function verifyPlatformCall(
  headers: Record<string, string | string[] | undefined>,
  rawBody: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<void> {
  const one = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const id = one("webhook-id");
  const timestamp = one("webhook-timestamp");
  const signatures = one("webhook-signature");
  if (!id || !timestamp || !signatures)
    throw refuseUnsigned("webhook-id, webhook-timestamp and webhook-signature are required");
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS)
    throw refuseUnsigned("webhook-timestamp is outside the tolerance");
  const own = await activeSigningKey();
  const candidates: KeyObject[] = [createPublicKey(own.privateKey)];
  const kid = one("webhook-key-id");
  if (kid !== own.kid) {
    const { keys } = await publishedJwks();
    for (const key of keys) {
      if (key.kid === own.kid || (kid && key.kid !== kid)) continue;
      candidates.push(createPublicKey({ key: { kty: key.kty, crv: key.crv, x: key.x }, format: "jwk" }));
    }
  }
  const message = Buffer.from(`${id}.${timestamp}.${rawBody}`, "utf8");
  for (const part of signatures.split(" ")) {
    const [version, value] = part.split(",", 2);
    if (version !== "v1a" || !value) continue;
    const signature = Buffer.from(value, "base64");
    if (candidates.some((key) => verify(null, message, key, signature))) return;
  }
  throw refuseUnsigned("no signature by a platform key matches");
}
