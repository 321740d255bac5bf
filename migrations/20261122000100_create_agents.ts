// Agents are the identity every key, listing and invocation hangs on (spec: "Agent (quickstart result)").
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("agents", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.text("name").notNullable();
    t.text("intent").notNullable();
    t.text("signing_public_key").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("intent in ('buyer','seller','both')", [], "agents_intent_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("agents");
}
