// Calls to seller endpoints are signed with the platform's Ed25519 key (docs/routing.md "Calling a provider").
// When PLATFORM_SIGNING_KEY is unset the key is generated once and kept here, so the API and every
// worker sign with the same key and /.well-known/jwks.json can publish it. The partial unique index
// allows one active key: concurrent first starts insert with ON CONFLICT DO NOTHING and all read the
// winner. Retired keys stay published for a while so signatures made just before a rotation verify.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("platform_signing_keys", (t) => {
    t.text("kid").primary();
    t.jsonb("public_jwk").notNullable();
    t.text("private_pkcs8").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("retired_at", { useTz: true });
  });
  await knex.raw(
    "create unique index platform_signing_keys_one_active on platform_signing_keys ((true)) where retired_at is null",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("platform_signing_keys");
}
