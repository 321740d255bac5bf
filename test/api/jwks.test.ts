import { randomBytes } from "node:crypto";
import knexFactory from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { activeSigningKey, generateSigningKey, signMessage } from "../../shared/routing/request-signing.js";
import { findActiveSigningKey, insertSigningKeyIfNone } from "../../shared/routing/store/signing-keys.js";
import { api } from "../helpers/http.js";
import { checkPlatformSignature } from "../helpers/seller-verify.js";
import { startService, type TestService } from "../helpers/service.js";
import { TEST_DATABASE_URL } from "../helpers/test-env.js";

let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => service.stop());

/** A retired key row, retired `daysAgo` days ago. */
async function insertRetiredKey(daysAgo: number): Promise<string> {
  const { key, pkcs8 } = generateSigningKey();
  await db()("platform_signing_keys").insert({
    kid: key.kid,
    public_jwk: JSON.stringify(key.publicJwk),
    private_pkcs8: pkcs8,
    retired_at: db().raw("now() - make_interval(days => ?)", [daysAgo]),
  });
  return key.kid;
}

describe("GET /.well-known/jwks.json", () => {
  it("publishes the active key as an Ed25519 JWK, without auth, and never a private part", async () => {
    const res = await api("GET", "/.well-known/jwks.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("public, max-age=300");
    const active = await findActiveSigningKey(db());
    expect(active).toBeDefined();
    const jwk = res.body.keys.find((k: { kid: string }) => k.kid === active!.kid);
    expect(jwk).toEqual({
      kty: "OKP",
      crv: "Ed25519",
      x: active!.public_jwk.x,
      kid: active!.kid,
      use: "sig",
      alg: "EdDSA",
    });
    expect(res.text).not.toContain(active!.private_pkcs8);
    expect(res.text).not.toMatch(/"d"/);
  });

  it("a signature the platform makes for a provider call verifies against the published keys", async () => {
    const body = JSON.stringify({ invocation_id: "x", listing_id: "y", attempt: 1, input: {} });
    const headers = signMessage(await activeSigningKey(), "x.1", body);
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    expect(checkPlatformSignature(headers, Buffer.from(body), jwks)).toBeNull();
  });

  it("keeps a key retired within 7 days and drops one retired longer ago", async () => {
    const recent = await insertRetiredKey(1);
    const old = await insertRetiredKey(8);
    try {
      const kids = (await api("GET", "/.well-known/jwks.json")).body.keys.map((k: { kid: string }) => k.kid);
      expect(kids).toContain(recent);
      expect(kids).not.toContain(old);
    } finally {
      await db()("platform_signing_keys").whereIn("kid", [recent, old]).delete();
    }
  });
});

describe("creating the stored key", () => {
  // A schema of its own holding a copy of the table (indexes included), so the race starts from no key
  // without touching the key every other test file uses.
  const schema = `signing_race_${randomBytes(4).toString("hex")}`;
  const racers = knexFactory({
    client: "pg",
    connection: TEST_DATABASE_URL,
    searchPath: [schema],
    pool: { min: 0, max: 8 },
  });

  afterAll(async () => {
    await racers.raw(`drop schema if exists ${schema} cascade`);
    await racers.destroy();
  });

  it("concurrent processes inserting at once end with exactly one active key", async () => {
    await racers.raw(`create schema ${schema}`);
    await racers.raw(
      `create table ${schema}.platform_signing_keys (like public.platform_signing_keys including all)`,
    );
    const candidates = Array.from({ length: 8 }, () => generateSigningKey());
    const won = await Promise.all(
      candidates.map(({ key, pkcs8 }) =>
        insertSigningKeyIfNone(racers, { kid: key.kid, public_jwk: key.publicJwk, private_pkcs8: pkcs8 }),
      ),
    );
    expect(won.filter(Boolean)).toHaveLength(1);
    const active = await racers("platform_signing_keys").whereNull("retired_at");
    expect(active).toHaveLength(1);
    expect(active[0].kid).toBe(candidates[won.indexOf(true)]!.key.kid);
  });
});
