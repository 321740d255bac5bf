// A receipt is written in the same transaction that marks an invocation succeeded; UNIQUE(invocation_id)
// makes a second receipt for one invocation impossible, whatever the queue redelivers.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("receipts", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("invocation_id").notNullable().unique().references("invocations.id");
    t.uuid("agent_id").notNullable().references("agents.id");
    t.uuid("listing_id").notNullable().references("listings.id");
    t.bigInteger("amount_micros").notNullable();
    t.text("currency").notNullable().defaultTo("USDC");
    t.jsonb("provider_evidence").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["agent_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("receipts");
}
