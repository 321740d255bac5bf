// Idempotency keys are claimed with INSERT … ON CONFLICT on (agent_id, key); the fingerprint tells a
// replay from a reuse with another payload. Rows expire (IDEMPOTENCY_RETENTION_HOURS) and are swept.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("idempotency_keys", (t) => {
    t.bigIncrements("id");
    t.uuid("agent_id").notNullable().references("agents.id");
    t.text("key").notNullable();
    t.text("fingerprint").notNullable();
    t.uuid("invocation_id").notNullable().references("invocations.id");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.unique(["agent_id", "key"]);
    t.index(["expires_at"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("idempotency_keys");
}
