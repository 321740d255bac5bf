// One row per execute/invoke request: the intent the API commits before anything is enqueued.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("invocations", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.uuid("api_key_id").notNullable().references("api_keys.id");
    t.uuid("listing_id").notNullable().references("listings.id");
    t.text("task").notNullable();
    t.text("route").notNullable();
    t.jsonb("input").notNullable();
    t.bigInteger("max_cost_micros");
    t.bigInteger("price_micros").notNullable();
    t.text("status").notNullable().defaultTo("queued");
    t.jsonb("output");
    t.jsonb("error");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("started_at", { useTz: true });
    t.timestamp("completed_at", { useTz: true });
    t.check("status in ('queued','running','succeeded','failed')", [], "invocations_status_check");
    t.index(["agent_id", "created_at"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("invocations");
}
