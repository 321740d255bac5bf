// Approvals (issue 6): one row per purchase held for a supervisor's decision. The decision is a
// conditional update (status = 'pending' and not expired), so approve and deny are each taken exactly
// once even when they race; expires_at is when the expiry sweeper releases the hold instead.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("approvals", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.uuid("invocation_id").notNullable().unique().references("invocations.id");
    t.uuid("requested_by_key_id").notNullable().references("api_keys.id");
    t.bigInteger("amount_micros").notNullable();
    t.bigInteger("threshold_micros").notNullable();
    t.text("status").notNullable().defaultTo("pending");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.timestamp("decided_at", { useTz: true });
    t.uuid("decided_by_key_id").references("api_keys.id");
    t.text("note");
    t.check("status in ('pending','approved','denied','expired')", [], "approvals_status_check");
    t.check("amount_micros > 0", [], "approvals_amount_check");
    t.index(["agent_id", "created_at"], "approvals_agent_idx");
  });
  await knex.raw(
    "create index approvals_pending_expiry_idx on approvals (expires_at) where status = 'pending'",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("approvals");
}
