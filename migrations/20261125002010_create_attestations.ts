// Attestations (issue 17): the signed result of one verification order — a compact JWS (EdDSA, the
// platform's Ed25519 key named by kid in /.well-known/jwks.json) over the JCS bytes of `payload`. One per
// order: a rerun is a new order with a new attestation, and the old one is kept. Rows are never updated;
// expires_at bounds how long the verify route calls the attestation valid.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("attestations", (t) => {
    t.uuid("id").primary();
    t.uuid("order_id").notNullable().unique().references("verification_orders.id");
    t.text("kid").notNullable();
    t.text("jws").notNullable();
    t.jsonb("payload").notNullable();
    t.text("verdict").notNullable();
    t.timestamp("observed_at", { useTz: true }).notNullable();
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("verdict in ('verified','reachable','failed')", [], "attestations_verdict_check");
    t.check("expires_at > observed_at", [], "attestations_expiry_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("attestations");
}
