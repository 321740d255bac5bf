// Append-only audit trail: who did what to which subject, tied to the request id that did it.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("audit_events", (t) => {
    t.bigIncrements("id");
    t.timestamp("at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.uuid("actor_agent_id");
    t.text("action").notNullable();
    t.text("subject_type").notNullable();
    t.text("subject_id").notNullable();
    t.text("request_id");
    t.jsonb("data").notNullable().defaultTo("{}");
    t.index(["subject_type", "subject_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("audit_events");
}
