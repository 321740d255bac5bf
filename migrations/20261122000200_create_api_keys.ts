// API keys are stored only as a SHA-256 hash (high-entropy tokens need no slow hash); prefix and last
// four characters are kept for display. Scopes and limits arrive with the spend-controls issue.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("api_keys", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.text("key_hash").notNullable().unique();
    t.text("prefix").notNullable();
    t.text("last_four").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("revoked_at", { useTz: true });
    t.index(["agent_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("api_keys");
}
