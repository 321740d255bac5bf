// Operator-controlled platform state that must be the same for every process (docs/payments.md "The paid-execution
// gate"). One row per key. The custody row is seeded unfrozen: whether paid execution is live also needs
// a configured chain and signer, so a fresh install without them is still read-only. Paid holds read the
// custody row FOR SHARE inside their own transaction and a freeze takes it FOR UPDATE, so once a freeze
// commits no new hold can.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("platform_settings", (t) => {
    t.text("key").primary();
    t.jsonb("value").notNullable();
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text("updated_by");
  });
  await knex("platform_settings").insert({
    key: "custody",
    value: JSON.stringify({ frozen: false, reason: null }),
    updated_by: "migration",
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("platform_settings");
}
