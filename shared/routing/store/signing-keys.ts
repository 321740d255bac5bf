import type { Db } from "../../db/knex.js";

/** The public half of an Ed25519 key as a JWK (RFC 8037). */
export interface Ed25519Jwk {
  kty: "OKP";
  crv: "Ed25519";
  x: string;
}

export interface SigningKeyRow {
  kid: string;
  public_jwk: Ed25519Jwk;
  /** PKCS#8 DER, base64url. */
  private_pkcs8: string;
  created_at: Date;
  retired_at: Date | null;
}

export type NewSigningKey = Pick<SigningKeyRow, "kid" | "public_jwk" | "private_pkcs8">;

/**
 * Inserts the key unless an active key exists; the partial unique index makes this safe under
 * concurrency (a loser inserts nothing). True when this key became the active one.
 */
export async function insertSigningKeyIfNone(q: Db, key: NewSigningKey): Promise<boolean> {
  const result = await q.raw(
    `insert into platform_signing_keys (kid, public_jwk, private_pkcs8)
     values (?, ?::jsonb, ?)
     on conflict do nothing
     returning kid`,
    [key.kid, JSON.stringify(key.public_jwk), key.private_pkcs8],
  );
  return result.rows.length === 1;
}

export async function findActiveSigningKey(q: Db): Promise<SigningKeyRow | undefined> {
  return q<SigningKeyRow>("platform_signing_keys").whereNull("retired_at").first();
}

/** Public keys to publish: the active one (when asked) and those retired within the last `days`. */
export async function listPublishableKeys(
  q: Db,
  options: { includeActive: boolean; retiredWithinDays: number },
): Promise<Pick<SigningKeyRow, "kid" | "public_jwk">[]> {
  return q<SigningKeyRow>("platform_signing_keys")
    .select("kid", "public_jwk")
    .where((w) => {
      w.where("retired_at", ">", q.raw("now() - make_interval(days => ?)", [options.retiredWithinDays]));
      if (options.includeActive) w.orWhereNull("retired_at");
    })
    .orderBy("created_at", "desc");
}
