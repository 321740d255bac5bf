// Every provider call is evidence of its own: one row per attempt, numbered within its invocation, so a
// worker that dies mid-call leaves a visible 'running' attempt the next worker marks 'abandoned'.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("invocation_attempts", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("invocation_id").notNullable().references("invocations.id");
    t.integer("attempt_no").notNullable();
    t.uuid("listing_id").notNullable().references("listings.id");
    t.text("status").notNullable().defaultTo("running");
    t.text("error_code");
    t.text("error_message");
    t.integer("http_status");
    t.integer("latency_ms");
    t.timestamp("started_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("finished_at", { useTz: true });
    t.unique(["invocation_id", "attempt_no"]);
    t.check("status in ('running','succeeded','failed','abandoned')", [], "invocation_attempts_status_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("invocation_attempts");
}
